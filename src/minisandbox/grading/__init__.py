"""Grading: run a prediction's tests in a fresh sandbox and turn the log into a report.

Owns `logparsers` (log -> per-test status), `official` (the official harnesses' parsers and
decision), `results` and `resultplugin` (per-test outcomes on a channel the log cannot forge,
and the pytest plugin writing it), `grading` (statuses -> SWE-bench report), `gradedstate`
(the base tree plus the task's test files), `suspicious` (what a patch has no business
changing), `evalscript` (the bash run inside the sandbox), `evaluate` (one fresh environment
per evaluation), `validate` (gold/empty-patch validation of published tasks) and `label`
(FAIL_TO_PASS/PASS_TO_PASS of candidate tasks).

May import: the contracts at the package root, `minisandbox.sandbox` and `minisandbox.node`.
Never `minisandbox.pipeline`, `minisandbox.task`, integrations or the CLI.
"""
