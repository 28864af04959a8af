"""Build pipeline: task records -> unique repo snapshots and environments -> published store.

Owns `plan` (the plan of unique keys), `keys`, `git` (mirrors and snapshots), `resolve`
(uv locks), `condaenv` (a conda environment file as pip requirements), `asof_index` (a
package index as of a date), `build`, `residue` (what the build leaves in /testbed and
HOME), `bytecode` (deterministic .pyc files), `testpycs` (the warm-up's
assertion-rewritten test modules, kept for the eval script), `interplayer` (the interpreter layer), `pack`
(archives and squashfs images), `chunking` (content-defined cutting of images), `failures`
(retrying and recording a step's failure), `bundled` (the bundled task set), `envjob` (one
environment key's job) and `steps` (the bodies of the workflow's rules, run as
``minisandbox pipeline <step>``).

May import: the contracts at the package root, `minisandbox.sandbox` and `minisandbox.node`.
Never `minisandbox.grading`, `minisandbox.task`, integrations or the CLI.
"""
