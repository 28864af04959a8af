"""Node runtime: getting a task's published artifacts onto one machine, fast and safely.

Owns `store` (fsspec-backed store access), `signing` (publisher signatures over a store's
documents), `freshness` (refusing a rolled-back signed index), `sync` (push/pull/verify
between stores), `chunks` (chunked images: chunk lists and packs, reassembly), `cache` (the
node-local artifact cache and leases), `restore` (unpacking and mounting layers),
`fusemount` and `mountholder` (rootless squashfuse mounts and the daemon holding them),
`iobudget` (the node-wide I/O semaphore), `verified` (documents this node already
validated) and `runtime` (`prepare`/`fetch` a task).

May import: the contracts at the package root and `minisandbox.sandbox`. Nodes never need
the build tools (`minisandbox.pipeline`) nor grading.
"""
