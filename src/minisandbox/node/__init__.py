"""Node runtime: getting a task's published artifacts onto one machine, fast and safely.

Owns `store` (fsspec-backed store access), `sync` (push/pull/verify between stores),
`cache` (the node-local artifact cache and leases), `restore` (unpacking and mounting
layers), `iobudget` (the node-wide I/O semaphore) and `runtime` (`prepare`/`fetch` a task).

May import: the contracts at the package root and `minisandbox.sandbox`. Nodes never need
the build tools (`minisandbox.pipeline`) nor grading.
"""
