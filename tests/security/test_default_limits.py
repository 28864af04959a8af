"""Attack: exhaust the node from a sandbox nobody configured limits for: fill memory-backed
storage through every tmpfs, flood the controller with output. Limits are on by default
(`Limits.default()`, $MINISANDBOX_LIMITS), one tmpfs budget covers every writable tmpfs,
output is capped per command, in the API and the CLI, root and rootless."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minisandbox.sandbox.limits import DEFAULT_LIMITS, Limits, LimitsError
from minisandbox.sandbox.sandbox import SandboxConfig
from tests.fixtures.sandbox import SRC
from tests.security.conftest import MODES

FILL = """
for d in /tmp /dev/shm /root; do
  case "$(dd if=/dev/zero of=$d/fill bs=1M count=40 2>&1)" in
    *"No space left on device"*) echo "$d full" ;;
    *) echo "$d ok" ;;
  esac
done
du -cm /tmp/fill /dev/shm/fill /root/fill | tail -1
"""


@pytest.mark.slow
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_limits_are_on_by_default(attack):
    out = attack("""
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
            r = sb.execute("ulimit -t; df -B1M --output=size /tmp | tail -1")
            out = {"mode": sb.limits_mode, "out": r.output}
    """)
    mode = out["mode"]
    for name in ("memory", "pids", "cpu_seconds", "tmpfs_bytes", "output_bytes"):
        assert name in mode, mode
    cpu, tmp_mb = out["out"].split()
    assert int(cpu) == DEFAULT_LIMITS.cpu_seconds
    assert int(tmp_mb) == DEFAULT_LIMITS.tmpfs_bytes >> 20  # the one budget, not half the RAM


@pytest.mark.slow
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_one_tmpfs_budget_for_all_writable_places(attack):
    """64M budget: 40M in /tmp fits, the next 40M in /dev/shm does not, /root is full too."""
    out = attack(
        """
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:
            r = sb.execute(P["fill"])
            small = sb.execute("rm -f /tmp/fill /dev/shm/fill /root/fill; head -c 1000000 /dev/zero > /tmp/ok && echo fits")
            out = {"fill": r.output, "small": small.output}
    """,
        fill=FILL,
        extra_env={"MINISANDBOX_LIMITS": "tmpfs=64M"},
    )
    lines = out["fill"].split()
    assert lines[:6] == ["/tmp", "ok", "/dev/shm", "full", "/root", "full"]  # the first 40M fit, no more
    assert int(out["fill"].split()[-2]) <= 64  # total written across the three places
    assert "fits" in out["small"]  # freed space is usable again


@pytest.mark.slow
@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_output_is_capped_per_command(attack):
    out = attack("""
        with Sandbox([Layer(P["repo"], "/testbed")], limits=Limits.default().with_settings("output=64K")) as sb:
            r = sb.execute("head -c 5000000 /dev/zero | tr '\\\\0' x; echo; echo done >&2")
            from minisandbox.sandbox.shell import session
            s = session(sb, "s").run("head -c 5000000 /dev/zero | tr '\\\\0' y")
            out = {"n": len(r.output), "trunc": r.truncated, "rc": r.returncode, "sn": len(s.output)}
    """)
    assert out["rc"] == 0 and out["trunc"] is True
    assert out["n"] <= 64 << 10 and out["sn"] <= 64 << 10


@pytest.mark.slow
@pytest.mark.root
def test_cli_output_is_capped(tmp_path):
    (tmp_path / "repo").mkdir()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "minisandbox.cli",
            "sandbox-exec",
            "--layer",
            f"{tmp_path / 'repo'}:/testbed",
            "--max-output",
            "100K",
            "--",
            "head -c 20000000 /dev/zero | tr '\\0' x; echo tail-marker",
        ],
        capture_output=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC},
    )
    assert res.returncode == 0
    assert len(res.stdout) <= 100 << 10
    assert b"tail-marker" not in res.stdout
    assert b"output truncated" in res.stderr


def test_default_limits_reach_every_sandbox_user(monkeypatch):
    """run/shell/sandbox-exec, eval (SandboxExecutor) and validation (LayerExecutor) build
    their sandboxes from SandboxConfig without a `limits` option: they get the defaults."""
    from minisandbox.grading.evaluate import LayerExecutor, SandboxExecutor

    assert SandboxConfig().limits == Limits.default() == DEFAULT_LIMITS
    assert "limits" not in SandboxExecutor().options
    assert "limits" not in LayerExecutor(store="x", env_manifest={}, repo_manifests={}, repo_key_of={}).options
    monkeypatch.setenv("MINISANDBOX_LIMITS", "memory=2G,pids=none,cpu=60,tmpfs=1G,output=1M")
    got = SandboxConfig().limits
    assert (got.memory_bytes, got.pids, got.cpu_seconds, got.tmpfs_bytes, got.output_bytes) == (
        2 << 30,
        None,
        60,
        1 << 30,
        1 << 20,
    )
    monkeypatch.setenv("MINISANDBOX_LIMITS", "memory=lots")
    with pytest.raises(LimitsError, match="MINISANDBOX_LIMITS"):
        SandboxConfig()


class _Probe:
    """Stands in for an EvalScript: the grading executors run its set-up part with bash
    (`render_prep()`, or `render()` for the whole script), then its test command."""

    repo_dir = "/"
    results_dir = ""
    TEXT = "ulimit -t; df -B1M --output=size /tmp | tail -1\n"

    def render(self) -> str:
        return self.TEXT

    def render_prep(self) -> str:
        return self.TEXT

    def test_argv(self) -> list[str]:
        return ["true"]

    def results_manifest(self) -> dict[str, object]:
        return {"root": self.repo_dir}  # no graded state: nothing of a repo is checked

    def test_section(self, output: str, returncode: int, seconds: float) -> str:
        return ""


def _grading_executors(tmp_path):
    """The real grading executors over a real published store: `eval` (SandboxExecutor, via
    the index) and validation (LayerExecutor, via the pipeline's manifests), and a record."""
    import json

    from minisandbox.grading.evaluate import LayerExecutor, SandboxExecutor
    from minisandbox.node.cache import Cache
    from minisandbox.records import TaskRecord
    from minisandbox.sandbox import interpreters
    from tests.fixtures.runtime import build_store

    local = next((i for i in interpreters.available() if i.prefix == "/usr"), None)
    if local is None:
        pytest.skip("no system python under /usr")
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=1)
    mpath = tmp_path / "store" / "artifacts" / "env" / f"{info['envs'][0]['key']}.manifest.json"
    env_m = json.loads(mpath.read_text())
    env_m["interpreter"] = {"version": local.version, "prefix": "/usr"}
    mpath.write_text(json.dumps(env_m))
    task = info["tasks"][0]
    repo_m = json.loads((tmp_path / "store" / "artifacts" / "repo" / f"{task['repo_key']}.manifest.json").read_text())
    record = TaskRecord(
        instance_id=task["instance_id"], format="swesmith", repo="demo/proj", patch="", fail_to_pass=[], pass_to_pass=[]
    )
    cache = Cache(tmp_path / "cache")
    executors = [
        SandboxExecutor(store=info["url"], cache=cache),
        LayerExecutor(
            store=info["url"],
            env_manifest=env_m,
            repo_manifests={task["repo_key"]: repo_m},
            repo_key_of={task["instance_id"]: task["repo_key"]},
            cache=cache,
        ),
    ]
    return executors, record


@pytest.mark.slow
@pytest.mark.root
def test_eval_and_validation_sandboxes_get_default_limits(as_root, tmp_path):
    """The real grading executors over a real published store: `eval` (SandboxExecutor, via
    the index) and validation (LayerExecutor, via the pipeline's manifests)."""
    executors, record = _grading_executors(tmp_path)
    for executor in executors:
        with executor.open(record) as env:
            res = env.execute(_Probe(), timeout=60)
        assert res.returncode == 0, res.output
        cpu, tmp_mb = res.output.split()
        assert int(cpu) == DEFAULT_LIMITS.cpu_seconds, type(executor).__name__
        assert int(tmp_mb) == DEFAULT_LIMITS.tmpfs_bytes >> 20, type(executor).__name__


class _WorkersProbe(_Probe):
    """Four busy workers, each 1.5 s of CPU: 6 s in total."""

    TEXT = (
        "python3 -c 'import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n"
        "        t = time.process_time()\n        while time.process_time() - t < 1.5: pass\n"
        '        os._exit(0)\nfor _ in range(4): os.wait()\nprint("workers done")\'\n'
    )


@pytest.mark.slow
@pytest.mark.root
def test_eval_and_validation_enforce_the_cpu_total_per_command(as_root, tmp_path, monkeypatch):
    """The CPU limit of eval and validation is the per-command total (their sandboxes run
    every command in a cgroup of its own): four workers under the per-process limit are
    stopped at the 2 s total."""
    monkeypatch.setenv("MINISANDBOX_LIMITS", "cpu=2")
    executors, record = _grading_executors(tmp_path)
    for executor in executors:
        with executor.open(record) as env:
            res = env.execute(_WorkersProbe(), timeout=120)
        name = type(executor).__name__
        assert res.returncode == -9 and "workers done" not in res.output, (name, res.output)
        assert "over the limit of 2 s per command" in res.output, (name, res.output)
        used = float(res.output.split("used ")[1].split(" s of CPU")[0])
        # killed once the total is over 2 s; the message rounds to 0.01 s, so just over 2 s
        # (2.000-2.005, a prompt kill) reads "2.00"
        assert 2 <= used <= 4.0, (name, used)
