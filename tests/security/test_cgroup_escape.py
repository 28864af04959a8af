"""Attack: raise the sandbox's own memory/pids limits, or rewrite the caller's cgroup, from
inside (the red-team payload: nested user namespace + cgroup namespace, mount the cgroup
filesystem, write pids.max / memory limit, create a child cgroup). As root, where the
sandbox's limits are cgroups."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minisandbox.sandbox.limits import LEAF, LimitGroup, Limits, cgroup_parents

pytestmark = [pytest.mark.slow, pytest.mark.root]

# The payload of the red-team report, in one process (capabilities gained in a new user
# namespace do not survive an exec): nested user + mount + cgroup namespaces, mount the
# cgroup filesystem, raise pids.max and the memory limit, create a child cgroup.
RAISE_LIMITS = r"""
import ctypes, errno, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUSER = 0x20000, 0x2000000, 0x10000000
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP) != 0:
    print("unshare", errno.errorcode[ctypes.get_errno()])
    raise SystemExit(0)
print("unshared")
for ctrl in ("memory", "pids"):
    d = tempfile.mkdtemp()
    if libc.mount(b"none", d.encode(), b"cgroup", 0, ctrl.encode()) != 0 and \
            libc.mount(b"none", d.encode(), b"cgroup2", 0, None) != 0:
        print("mount-" + ctrl, errno.errorcode[ctypes.get_errno()])
        continue
    print("mounted-" + ctrl)
    for name, value in (("pids.max", "max"), ("memory.limit_in_bytes", "8589934592"), ("memory.max", "max")):
        try:
            with open(os.path.join(d, name), "w") as fh:
                fh.write(value)
            print("wrote-" + name)
        except OSError:
            pass
    try:
        os.mkdir(os.path.join(d, "escape"))
        print("made-child")
    except OSError:
        pass
"""


def _limit_files(group: LimitGroup) -> dict[str, str]:
    out = {}
    for d in group.dirs:
        for name in ("memory.limit_in_bytes", "memory.max", "pids.max"):
            path = os.path.join(d, name)
            if os.path.exists(path):
                out[path] = Path(path).read_text().strip()
    return out


def _caller_limits() -> dict[str, str]:
    out = {}
    for parent in cgroup_parents().values():
        for name in ("memory.limit_in_bytes", "memory.max", "pids.max"):
            path = os.path.join(parent, name)
            if os.path.exists(path):
                out[path] = Path(path).read_text().strip()
    return out


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "f.txt").write_text("x\n")
    return str(tmp_path / "repo")


def _needs_cgroups(sb) -> None:
    if not sb.limits or not sb.limits.dirs:
        pytest.skip("no writable cgroup hierarchy here: limits are rlimits (see minisandbox doctor)")


def test_payload_cannot_raise_its_limits(repo):
    from minisandbox.sandbox.sandbox import Layer, Sandbox

    caller_before = _caller_limits()
    with Sandbox([Layer(repo, "/testbed")], limits=Limits(memory_bytes=512 << 20, pids=64)) as sb:
        _needs_cgroups(sb)
        before = _limit_files(sb.limits)
        res = sb.run(["python3", "-c", RAISE_LIMITS])
        after = _limit_files(sb.limits)
        # the processes sit in the leaf below the limit cgroup (host view)
        procs = Path(sb.limits.procs_files[0]).read_text().split()
        inside = sb.execute("cat /proc/self/cgroup").output
        groups = list(sb.limits.dirs)
    assert "unshare EPERM" in res.output
    assert "mounted-" not in res.output and "wrote-" not in res.output
    assert after == before and before  # limits unchanged (and there were some)
    assert str(512 << 20) in before.values() or "536870912" in before.values()
    assert procs  # the sandbox's init lives in the leaf
    assert all(line.endswith(":/") for line in inside.strip().splitlines())  # leaf = root of its view
    assert _caller_limits() == caller_before
    assert not any(os.path.exists(g) for g in groups)  # removed on close


def test_debug_mode_without_seccomp_still_keeps_the_parent_limits(repo):
    """With the filter off (debugging only) the nested namespace works and the payload
    mounts its cgroup: it sees only its leaf; writing there cannot exceed the parent's
    limit, the caller's cgroup is out of reach, and the child it creates is removed."""
    from minisandbox.sandbox.sandbox import Layer, Sandbox

    caller_before = _caller_limits()
    with Sandbox([Layer(repo, "/testbed")], limits=Limits(memory_bytes=512 << 20, pids=64), seccomp=False) as sb:
        _needs_cgroups(sb)
        before = _limit_files(sb.limits)
        res = sb.run(["python3", "-c", RAISE_LIMITS])
        after = _limit_files(sb.limits)
        leaves = [os.path.join(d, LEAF) for d in sb.limits.dirs]
        children = [c for leaf in leaves for c in os.listdir(leaf) if os.path.isdir(os.path.join(leaf, c))]
        groups = list(sb.limits.dirs)
    assert "mounted-" in res.output  # the attack really ran
    assert after == before
    assert _caller_limits() == caller_before
    assert "escape" in children  # it did create a child cgroup of its leaf ...
    assert not any(os.path.exists(g) for g in groups)  # ... and close() removed it with the rest


def test_leaf_exists_without_memory_or_pids_limits(repo):
    """No memory/pids limit asked: the sandbox still gets its own (limit-free) cgroup, so its
    cgroup namespace is never rooted at the caller's cgroup."""
    from minisandbox.sandbox.sandbox import Layer, Sandbox

    with Sandbox([Layer(repo, "/testbed")], limits=Limits.unlimited()) as sb:
        _needs_cgroups(sb)
        assert all(os.path.basename(os.path.dirname(p)) == LEAF for p in sb.limits.procs_files)
        assert all(os.path.basename(p) in ("cgroup.procs", "tasks") for p in sb.limits.procs_files)
        assert Path(sb.limits.procs_files[0]).read_text().split()
        assert "memory" not in sb.limits_mode
