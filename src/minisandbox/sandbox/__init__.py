"""Sandboxes: namespaces, mounts, limits and shells for one command or one long session.

Owns `rootfs` (the stdlib-only init and fork server, run as ``python -I -S``), `sandbox`
(the `Sandbox` object and `ExecResult`), `shell` (persistent bash sessions), `limits`,
`interpreters` (host Python discovery) and `conda_shim`.

May import: the contracts at the package root (`paths`, `records`, `catalog`, `manifest`,
`index`, `errors`, `fsutil`, `tools`). It knows nothing of stores, builds or rewards.
"""
