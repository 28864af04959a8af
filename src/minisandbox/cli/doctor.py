"""`minisandbox doctor`: what sandboxes created by this user on this machine get (limits,
seccomp, user namespaces, keyring), with what to do about each weak spot."""

from __future__ import annotations

import argparse
import json
import os
import sys


def cmd_doctor(args: argparse.Namespace) -> int:
    from minisandbox.sandbox.hostcheck import FAIL, run_checks

    checks = run_checks()
    if args.json:
        print(json.dumps({"uid": os.geteuid(), "checks": [c.to_dict() for c in checks]}, indent=1))
    else:
        who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()} (rootless)"
        print(f"minisandbox doctor: sandboxes created by {who} on this machine")
        width = max(len(c.name) for c in checks)
        for c in checks:
            print(f"  [{c.status:4}] {c.name:<{width}}  {c.detail}")
        sys.stdout.flush()
    return 1 if any(c.status == FAIL for c in checks) else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="Check what sandboxes get on this machine: limits, seccomp, user namespaces.",
        description="Checks what a sandbox created by this user on this machine gets: cgroup "
        "limits (memory, pids, CPU time, tmpfs, output), seccomp, user namespaces and "
        "the kernel keyring. One line per check (ok, warn, fail) with what to do about "
        "each weak spot; exits 1 when a check fails.",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=cmd_doctor)
