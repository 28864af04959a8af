"""Non-root nodes: squashfs images mounted with squashfuse in the cache's mount-holder
namespace, sandboxes that join it, and the unpack fallback. Runs as the unprivileged test
user (tests/fixtures/sandbox.py) with the real squashfuse, FUSE and user namespaces."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.rootless_node import run_node_as_user, user_site  # noqa: F401  (fixture)
from tests.fixtures.runtime import build_store
from tests.fixtures.sandbox import TEST_USER, rootless_user, shared_tmp  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.rootless]

PRELUDE = """
import json, os, subprocess, sys
from pathlib import Path
from minisandbox.node.cache import Cache
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.runtime import prepare
from minisandbox.paths import REPO_PATH, VENV_PATH
cfg = json.loads(os.environ["MSB_TEST_CFG"])
base = Path(cfg["base"])
cache = Cache(base / "cache", budget=IOBudget(0, base / "cache" / "budget"))
def daemons():
    # this test's squashfuse daemons: their command line names an image of this cache (a
    # holder another run left behind, or its zombies, must not count)
    pattern = "squashfuse .*" + str(base / "cache").replace(".", "[.]")
    out = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", pattern], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())
"""


@pytest.fixture
def user_store(rootless_user, shared_tmp: Path, user_site: Path):  # noqa: F811
    if not shutil.which("mksquashfs") or not shutil.which("squashfuse"):
        pytest.skip("squashfs-tools / squashfuse not installed (scripts/setup.sh installs them)")
    reason = run_node_as_user(
        "import json; from minisandbox.node.fusemount import unavailable_reason; "
        "print(json.dumps(unavailable_reason()))",
        user_site,
    )
    if reason:
        pytest.skip(f"rootless FUSE mounts unavailable here: {reason}")
    info = build_store(shared_tmp / "store", shared_tmp / "work", n_envs=1, n_tasks=2, images=True)
    subprocess.run(["chown", "-R", TEST_USER, str(shared_tmp)], check=True)
    yield info, shared_tmp
    # never leave a holder or a squashfuse behind, whatever the test did
    run_node_as_user(
        PRELUDE + "cache.gc(max_bytes=0); cache.stop_mounts(); print(json.dumps(daemons()))",
        user_site,
        env={"MSB_TEST_CFG": json.dumps({"base": str(shared_tmp)})},
    )


def _run(code: str, site: Path, base: Path, info: dict, **env: str):
    cfg = {
        "base": str(base),
        "store": info["url"],
        "tasks": [t["instance_id"] for t in info["tasks"]],
        "env_image": info["envs"][0]["image"]["sha256"],
        "env_tar": info["envs"][0].get("sha256"),
    }
    return run_node_as_user(PRELUDE + code, site, env={"MSB_TEST_CFG": json.dumps(cfg), **env})


def _prepare_expecting_corrupt(site: Path, base: Path, info: dict) -> dict:
    """Prepare the first task as the user and report the ArtifactCorruptError (or None), the
    squashfuse daemons left, the cache's tmp and whether the env image was kept."""
    return _run(
        """
from minisandbox.node.cache import ArtifactCorruptError
try:
    prepare(cfg["tasks"][0], cfg["store"], cache=cache, images=True)
    res = {"error": None}
except ArtifactCorruptError as exc:
    res = {"error": str(exc)}
res["daemons"] = daemons()
res["tmp"] = os.listdir(cache.tmp)
res["env_image"] = (cache.archives / cfg["env_image"]).exists()
print(json.dumps(res))
""",
        site,
        base,
        info,
    )


def test_rootless_image_mount_seen_only_by_sandboxes_that_join(user_store, user_site: Path) -> None:  # noqa: F811
    info, base = user_store
    out = _run(
        """
from minisandbox.sandbox.sandbox import Layer, Sandbox
res = {}
with prepare(cfg["tasks"][0], cfg["store"], cache=cache) as p:
    res["mount_ns"] = p.mount_ns
    res["digests"] = [r.digest for r in p.results]
    res["host_view"] = sorted(os.listdir(p.layers[REPO_PATH]))
    res["daemons"] = daemons()
    with Sandbox([Layer(str(path), mount) for mount, path in p.layers.items()], join_ns=p.mount_ns) as sb:
        r = sb.execute("cat /testbed/src/mod.py; echo '# edited' >> /testbed/src/mod.py; tail -1 /testbed/src/mod.py; "
                       "cat /proc/[0-9]*/comm | sort -u | tr '\\\\n' ' '")
        res["sandbox"] = r.output
        res["rc"] = r.returncode
    res["layer_untouched"] = "edited" not in open(f"/proc/{p.mount_ns['pid']}/root{p.layers[REPO_PATH]}/src/mod.py").read()
with prepare(cfg["tasks"][1], cfg["store"], cache=cache) as p2:
    res["second"] = [r.downloaded for r in p2.results]
res["gc_removed"] = len(cache.gc(max_bytes=0).removed)
res["stopped"] = cache.stop_mounts()
res["after"] = daemons()
print(json.dumps(res))
""",
        user_site,
        base,
        info,
    )
    assert out["mount_ns"] and out["mount_ns"]["pid"] > 0
    assert out["digests"][1] == info["envs"][0]["image"]["sha256"]  # the image was mounted, not the tar
    assert out["host_view"] == []  # the mount exists only in the holder's namespace
    assert len(out["daemons"]) == 2  # one squashfuse per image (repo, env)
    assert out["rc"] == 0, out["sandbox"]
    assert out["sandbox"].startswith("def f():") and "# edited" in out["sandbox"]  # readable, writable overlay
    assert "squashfuse" not in out["sandbox"]  # the daemons are outside the sandbox's pid namespace
    assert out["layer_untouched"]
    assert out["second"] == [True, False]  # a new repo image; the env image was already mounted
    assert out["gc_removed"] == 3 and out["stopped"] and out["after"] == []


def test_tampered_cached_image_is_fetched_again_before_mount(user_store, user_site: Path) -> None:  # noqa: F811
    info, base = user_store
    out = _run(
        """
from minisandbox.node.cache import Artifact
from minisandbox.node.store import Store
st = Store(cfg["store"])
m = json.loads(st.read_text("artifacts/env/" + [n for n in os.listdir(Path(cfg["store"]) / "artifacts/env")
                                                 if n.endswith(".manifest.json")][0]))
img = Artifact.image_from_manifest(st, m)
path, _ = cache.fetch_archive(st, img)
os.chmod(path, 0o644)
with open(path, "r+b") as f:  # someone with write access to the node cache changes it
    f.seek(200); f.write(b"tampered")
res, lease = cache.image_layer(st, img)
ok = (Path(f"/proc/{cache.mount_namespace()['pid']}/root{res.path}") / "pyvenv.cfg").is_file()
from minisandbox.fsutil import file_digest
print(json.dumps({"downloaded": res.downloaded, "ok": ok, "sha": file_digest(path)[0] == img.sha256}))
os.unlink(lease)
""",
        user_site,
        base,
        info,
    )
    assert out == {"downloaded": True, "ok": True, "sha": True}


def test_tampered_store_image_is_refused_and_never_mounted(user_store, user_site: Path) -> None:  # noqa: F811
    info, base = user_store
    img = Path(info["store"].path(f"artifacts/env/{info['envs'][0]['image']['artifact']}"))
    data = bytearray(img.read_bytes())
    data[300] ^= 0xFF
    img.write_bytes(bytes(data))
    out = _prepare_expecting_corrupt(user_site, base, info)
    assert out["error"] and "corrupt" in out["error"] and info["envs"][0]["key"] in out["error"]
    assert len(out["daemons"]) <= 1  # the repo image may be mounted; the env image never


def test_without_squashfuse_the_archive_is_unpacked(user_store, user_site: Path) -> None:  # noqa: F811
    info, base = user_store
    out = _run(
        """
with prepare(cfg["tasks"][0], cfg["store"], cache=cache) as p:
    res = {"mount_ns": p.mount_ns, "env": p.results[1].digest, "cfg": (p.layers[VENV_PATH] / "pyvenv.cfg").is_file()}
print(json.dumps(res))
""",
        user_site,
        base,
        info,
        MINISANDBOX_SQUASHFUSE="/nonexistent/squashfuse",
    )
    assert out == {"mount_ns": None, "env": info["envs"][0]["sha256"], "cfg": True}


@pytest.fixture
def user_chunked_store(rootless_user, shared_tmp: Path, user_site: Path):  # noqa: F811
    """Like user_store, but published as the pipeline does by default: chunks and chunk
    lists only, no whole image and no archive in the store."""
    if not shutil.which("mksquashfs") or not shutil.which("squashfuse"):
        pytest.skip("squashfs-tools / squashfuse not installed (scripts/setup.sh installs them)")
    reason = run_node_as_user(
        "import json; from minisandbox.node.fusemount import unavailable_reason; "
        "print(json.dumps(unavailable_reason()))",
        user_site,
    )
    if reason:
        pytest.skip(f"rootless FUSE mounts unavailable here: {reason}")
    info = build_store(
        shared_tmp / "store",
        shared_tmp / "work",
        n_envs=1,
        n_tasks=2,
        images=True,
        chunked=True,
        whole=False,
        archive=False,
    )
    assert "sha256" not in info["envs"][0]
    subprocess.run(["chown", "-R", TEST_USER, str(shared_tmp)], check=True)
    yield info, shared_tmp
    run_node_as_user(
        PRELUDE + "cache.gc(max_bytes=0); cache.stop_mounts(); print(json.dumps(daemons()))",
        user_site,
        env={"MSB_TEST_CFG": json.dumps({"base": str(shared_tmp)})},
    )


def test_rootless_chunked_images_are_assembled_then_mounted(user_chunked_store, user_site: Path) -> None:  # noqa: F811
    info, base = user_chunked_store
    env_img = info["envs"][0]["image"]
    assert not info["store"].exists(f"artifacts/env/{env_img['artifact']}")
    out = _run(
        """
from minisandbox.fsutil import file_digest
from minisandbox.sandbox.sandbox import Layer, Sandbox
res = {}
with prepare(cfg["tasks"][0], cfg["store"], cache=cache) as p:
    res["digests"] = [r.digest for r in p.results]
    res["mounters"] = [r.mounter for r in p.results]
    res["image_ok"] = file_digest(cache.archives / cfg["env_image"])[0] == cfg["env_image"]
    with Sandbox([Layer(str(path), mount) for mount, path in p.layers.items()], join_ns=p.mount_ns) as sb:
        r = sb.execute("cat /testbed/src/mod.py; cat /opt/miniconda3/envs/testbed/pyvenv.cfg")
        res["sandbox"], res["rc"] = r.output, r.returncode
res["gc_removed"] = len(cache.gc(max_bytes=0).removed)
res["archives_left"] = sorted(os.listdir(cache.archives))
print(json.dumps(res))
""",
        user_site,
        base,
        info,
    )
    assert out["digests"][1] == env_img["sha256"] and out["mounters"] == ["fuse", "fuse"]
    assert out["image_ok"]
    assert out["rc"] == 0 and out["sandbox"].startswith("def f():") and "home = " in out["sandbox"]
    assert out["gc_removed"] == 2 and out["archives_left"] == []


def test_rootless_tampered_chunk_is_refused_and_never_mounted(user_chunked_store, user_site: Path) -> None:  # noqa: F811
    info, base = user_chunked_store
    from minisandbox.manifest import pack_path

    env_img = info["envs"][0]["image"]
    doc = json.loads(info["store"].read_bytes(f"artifacts/env/{env_img['chunks']['artifact']}"))
    (pack, offset), (_, length) = doc["at"][-1], doc["chunks"][-1]
    victim = Path(info["store"].path(pack_path(doc["packs"][pack][0])))  # the pack holding the last chunk
    data = bytearray(victim.read_bytes())
    data[offset + length - 1] ^= 0xFF
    victim.write_bytes(bytes(data))
    out = _prepare_expecting_corrupt(user_site, base, info)
    assert out["error"] and pack_path(doc["packs"][pack][0]) in out["error"] and info["envs"][0]["key"] in out["error"]
    assert len(out["daemons"]) <= 1  # the repo image may be mounted; the env image never
    assert out["tmp"] == [] and not out["env_image"]


def test_rootless_without_squashfuse_nor_archive_the_image_is_unpacked(
    user_chunked_store,  # noqa: F811
    user_site: Path,
) -> None:
    """The default store (no archive) on a node where this user cannot mount: the image is
    assembled, verified and unpacked with unsquashfs, and the sandbox runs on it."""
    info, base = user_chunked_store
    out = _run(
        """
from minisandbox.sandbox.sandbox import Layer, Sandbox
with prepare(cfg["tasks"][0], cfg["store"], cache=cache) as p:
    res = {"mount_ns": p.mount_ns, "env": p.results[1].digest, "mounters": [r.mounter for r in p.results],
           "owner": os.stat(p.layers[VENV_PATH] / "pyvenv.cfg").st_uid == os.getuid()}
    with Sandbox([Layer(str(path), mount) for mount, path in p.layers.items()]) as sb:
        r = sb.execute("cat /testbed/src/mod.py; cat /opt/miniconda3/envs/testbed/pyvenv.cfg")
        res["sandbox"], res["rc"] = r.output, r.returncode
with prepare(cfg["tasks"][0], cfg["store"], cache=cache) as p:
    res["again"] = [r.downloaded for r in p.results]
res["daemons"] = daemons()
res["gc_removed"] = len(cache.gc(max_bytes=0).removed)
res["layers_left"] = sorted(n for n in os.listdir(cache.layers) if not n.startswith("."))
print(json.dumps(res))
""",
        user_site,
        base,
        info,
        MINISANDBOX_SQUASHFUSE="/nonexistent/squashfuse",
    )
    assert out["mount_ns"] is None and out["env"] == info["envs"][0]["image"]["sha256"]
    assert out["mounters"] == ["", ""] and out["owner"] and out["daemons"] == []
    assert out["rc"] == 0 and out["sandbox"].startswith("def f():") and "home = " in out["sandbox"], out["sandbox"]
    assert out["again"] == [False, False]
    assert out["gc_removed"] == 2 and out["layers_left"] == []
