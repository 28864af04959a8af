"""Build pipeline: task records -> unique repo snapshots and environments -> published store.

Owns `plan` (the plan of unique keys), `keys`, `git` (mirrors and snapshots), `resolve`
(uv locks), `build`, `pack` (archives and squashfs images), `failures` (retrying and recording
a step's failure), `bundled` (the bundled task set) and `steps` (the bodies of the workflow's
rules, run as ``minisandbox pipeline <step>``).

May import: the contracts at the package root, `minisandbox.sandbox` and `minisandbox.node`.
Never `minisandbox.grading`, `minisandbox.task`, integrations or the CLI.
"""
