"""Grading: run a prediction's tests in a fresh sandbox and turn the log into a report.

Owns `logparsers` (log -> per-test status), `grading` (statuses -> SWE-bench report),
`evalscript` (the bash run inside the sandbox), `evaluate` (one fresh environment per
evaluation) and `validate` (gold/empty-patch validation of published tasks).

May import: the contracts at the package root, `minisandbox.sandbox` and `minisandbox.node`.
Never `minisandbox.pipeline`, `minisandbox.task`, integrations or the CLI.
"""
