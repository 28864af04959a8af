"""bench/bench_pipeline.py's main-job profile: process accounting records grouped by the
run's process tree (the bench itself is not run here: it builds the bundled set)."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bp():
    spec = importlib.util.spec_from_file_location("bench_pipeline", ROOT / "bench" / "bench_pipeline.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_pipeline"] = mod
    spec.loader.exec_module(mod)
    return mod


def _record(pid: int, ppid: int, ticks: int, comm: str) -> bytes:
    """One struct acct_v3 (64 bytes) with `ticks` of user time (comp_t, exponent 0)."""
    head = struct.pack("<BBHIIIIIIf", 0, 3, 0, 0, 0, 0, pid, ppid, 0, 0.0)
    times = struct.pack("<HHHHHHHH", ticks, 0, 0, 0, 0, 0, 0, 0)
    return head + times + comm.encode().ljust(16, b"\0")


def test_comp_t_decodes_mantissa_and_base8_exponent(bp) -> None:
    assert bp._comp_t(5) == 5
    assert bp._comp_t((1 << 13) | 5) == 40  # 5 * 8
    assert bp._comp_t((2 << 13) | 0x1FFF) == 0x1FFF * 64


def test_groups_follow_the_tree_of_the_run_only(bp, tmp_path: Path) -> None:
    root = 100
    recs = [
        _record(103, 102, 250, "pytest"),  # a validation run under a sandbox
        _record(102, 101, 5, "timeout"),
        _record(105, 104, 30, "bash"),  # records are in exit order: a child before its parent
        _record(104, root, 40, "python"),  # an orphaned fork server, reparented to the bench
        _record(101, root, 300, "jemalloc_bg_thd"),  # snakemake, named by its last thread
        _record(200, 1, 999, "python"),  # another user's process: not the run's
        _record(300, 102, 888, "python"),  # another's child of pid 102 reused after the run's 102 exited ...
        _record(102, 1, 777, "bash"),  # ... by this process of another user
        _record(root, 99, 77, "python"),  # written when the bench switches accounting off
    ]
    path = tmp_path / "acct"
    path.write_bytes(b"".join(recs))
    records = bp.ProcessAccounting(path).records()
    assert [r["cpu"] for r in records[:2]] == [2.5, 0.05]
    groups = bp.profile_groups(records, root)
    assert groups == {
        "pytest < timeout < snakemake": [2.5, 1],
        "timeout < snakemake": [0.05, 1],
        "snakemake": [3.4, 2],  # both children of the bench: snakemake and the orphan
        "bash < snakemake": [0.3, 1],
    }
    rows = bp.profile_table([{"groups": groups, "cgroup_cpu": 10.0}])
    assert rows[0] == ["snakemake", "3.4 (2)"]
    assert rows[-2] == ["accounted, all processes of the run", "6.2 (5)"]
    assert rows[-1] == ["cgroup - accounted (CPU under a 10 ms tick per process)", "3.8"]


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="process accounting needs root")
def test_accounting_counts_a_childs_cpu(tmp_path: Path) -> None:
    """Real acct(2) in a process of its own (the bench becomes a child subreaper, which a
    test process must not). Accounting is one switch per machine: this test ends the
    accounting of a `--main-job-profile` bench running at the same time."""
    script = f"""
import importlib.util, json, os, subprocess, sys
spec = importlib.util.spec_from_file_location("bench_pipeline", {str(ROOT / "bench" / "bench_pipeline.py")!r})
bp = importlib.util.module_from_spec(spec); sys.modules["bench_pipeline"] = bp; spec.loader.exec_module(bp)
from pathlib import Path
acct = bp.ProcessAccounting(Path({str(tmp_path / "acct")!r}))
with acct:
    p = subprocess.Popen([sys.executable, "-c", "sum(range(3 * 10**7))"])
    os.wait4(p.pid, 0)
    acct.reap()
print(json.dumps({{"ok": acct.ok, "groups": bp.profile_groups(acct.records(), os.getpid())}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    res = json.loads(out.stdout)
    if not res["ok"]:
        pytest.skip("this kernel has no process accounting (CONFIG_BSD_PROCESS_ACCT)")
    assert list(res["groups"]) == ["snakemake"]  # the one child, named as the bench's child
    cpu, count = res["groups"]["snakemake"]
    assert count == 1 and cpu >= 0.1
