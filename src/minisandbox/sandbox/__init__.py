"""Sandboxes: namespaces, mounts, limits and shells for one command or one long session.

Owns `rootfs` (private roots, controller side: starts the init program and talks to it),
`init_program` (the stdlib-only fork server, init, command spawner and helpers, run as
``python -I -S``), `seccomp` (its syscall filter, also stdlib-only), `sandbox` (the `Sandbox` object and `ExecResult`),
`shell` (persistent bash sessions), `limits` (cgroups, rlimits), `leftovers` (what a dead
controller left on the host, and its removal), `interpreters` (host Python discovery),
`hostlibs` (host shared libraries an environment loads), `hostcheck` (what this machine
gives a sandbox: `minisandbox doctor`) and `conda_shim`.

May import: the contracts at the package root (`paths`, `records`, `catalog`, `manifest`,
`index`, `errors`, `fsutil`, `tools`). It knows nothing of stores, builds or rewards.
"""
