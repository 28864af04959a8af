"""Root nodes: layers as loop-mounted squashfs images instead of unpacked trees."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from minisandbox.node.cache import Cache
from minisandbox.node.iobudget import IOBudget
from minisandbox.node.restore import can_mount_images, is_mounted
from minisandbox.node.runtime import prepare
from minisandbox.paths import REPO_PATH, VENV_PATH
from tests.fixtures.runtime import build_store

pytestmark = [pytest.mark.slow, pytest.mark.root]


@pytest.fixture
def image_store(tmp_path: Path):
    if not shutil.which("mksquashfs"):
        pytest.skip("squashfs-tools not installed (apt-get install squashfs-tools)")
    if not can_mount_images():
        pytest.skip("cannot loop-mount squashfs here (needs root, /dev/loop-control, kernel squashfs)")
    info = build_store(tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=2, images=True)
    yield info
    # never leave mounts behind, whatever the test did
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1]
        if target.startswith(str(tmp_path)):
            subprocess.run(["umount", "-l", target], check=False)


def test_images_are_mounted_read_only_and_leased(image_store: dict, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    tid = image_store["tasks"][0]["instance_id"]
    with prepare(tid, image_store["url"], cache=cache, images=True) as p:
        env_layer, repo_layer = p.layers[VENV_PATH], p.layers[REPO_PATH]
        assert is_mounted(env_layer) and is_mounted(repo_layer)
        assert (repo_layer / "src" / "mod.py").read_text().startswith("def f")
        assert os.readlink(env_layer / "bin" / "python")
        with pytest.raises(OSError) as exc:
            (repo_layer / "new.txt").write_text("x")
        assert exc.value.errno == errno.EROFS
        assert p.results[1].digest == image_store["envs"][0]["image"]["sha256"]  # the image, not the tar
        assert p.results[1].downloaded and (cache.archives / p.results[1].digest).is_file()
        assert cache.gc(max_bytes=0).removed == []  # leased: kept mounted
        assert is_mounted(env_layer)
    # a second task sharing the env: repo mounted now, env already mounted
    with prepare(image_store["tasks"][1]["instance_id"], image_store["url"], cache=cache, images=True) as p2:
        assert [r.downloaded for r in p2.results] == [True, False]
    report = cache.gc(max_bytes=0)
    assert len(report.removed) == 3 and report.total_after == 0
    assert not is_mounted(env_layer) and not env_layer.exists()
    assert not any(cache.archives.iterdir())


def test_images_off_unpacks_archives(image_store: dict, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    with prepare(image_store["tasks"][0]["instance_id"], image_store["url"], cache=cache, images=False) as p:
        assert not is_mounted(p.layers[VENV_PATH])
        assert p.results[1].digest == image_store["envs"][0]["sha256"]  # the tar.zst digest
        assert (p.layers[VENV_PATH] / "pyvenv.cfg").is_file()
    cache.gc(max_bytes=0)


def test_tampered_cached_image_is_fetched_again_before_mount(image_store: dict, tmp_path: Path) -> None:
    from minisandbox.fsutil import file_digest
    from minisandbox.node.cache import Artifact
    from minisandbox.node.store import Store

    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    st = Store(image_store["url"])
    img = Artifact.image_from_manifest(st, image_store["envs"][0])
    path, downloaded = cache.fetch_archive(st, img)
    assert downloaded
    with open(path, "r+b") as f:  # changed on the node after it was verified
        f.seek(200)
        f.write(b"tampered")
    result, lease = cache.image_layer(st, img)
    try:
        assert result.downloaded and result.mounter == "kernel"  # fetched again, then mounted
        assert file_digest(path) == (img.sha256, img.size)
        assert (result.path / "pyvenv.cfg").is_file()
    finally:
        lease.unlink()
        cache.gc(max_bytes=0)
    assert not is_mounted(result.path)


def test_tampered_store_image_is_refused_and_never_mounted(image_store: dict, tmp_path: Path) -> None:
    from minisandbox.node.cache import ArtifactCorruptError

    img = Path(image_store["store"].path(f"artifacts/env/{image_store['envs'][0]['image']['artifact']}"))
    data = bytearray(img.read_bytes())
    data[300] ^= 0xFF
    img.write_bytes(bytes(data))
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    with pytest.raises(ArtifactCorruptError, match=image_store["envs"][0]["key"]):
        prepare(image_store["tasks"][0]["instance_id"], image_store["url"], cache=cache, images=True)
    env_layer = cache.layers / image_store["envs"][0]["image"]["sha256"]
    assert not is_mounted(env_layer) and not (cache.archives / env_layer.name).exists()
    cache.gc(max_bytes=0)


# -- images stored as chunks (the pipeline's default): assembled on the node, then mounted --
@pytest.fixture
def chunked_store(tmp_path: Path):
    if not shutil.which("mksquashfs"):
        pytest.skip("squashfs-tools not installed (apt-get install squashfs-tools)")
    if not can_mount_images():
        pytest.skip("cannot loop-mount squashfs here (needs root, /dev/loop-control, kernel squashfs)")
    info = build_store(
        tmp_path / "store", tmp_path / "work", n_envs=1, n_tasks=2, images=True, chunked=True, whole=False
    )
    yield info
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1]
        if target.startswith(str(tmp_path)):
            subprocess.run(["umount", "-l", target], check=False)


def test_chunked_images_are_assembled_verified_and_mounted(chunked_store: dict, tmp_path: Path) -> None:
    from minisandbox.fsutil import file_digest

    st = chunked_store["store"]
    env_m = chunked_store["envs"][0]
    assert env_m["image"]["whole"] is False and not st.exists(f"artifacts/env/{env_m['image']['artifact']}")
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    with prepare(chunked_store["tasks"][0]["instance_id"], chunked_store["url"], cache=cache, images=True) as p:
        env_layer, repo_layer = p.layers[VENV_PATH], p.layers[REPO_PATH]
        assert is_mounted(env_layer) and is_mounted(repo_layer)
        assert (repo_layer / "src" / "mod.py").read_text().startswith("def f")
        assert (env_layer / "pyvenv.cfg").is_file()
        assert p.results[1].digest == env_m["image"]["sha256"] and p.results[1].mounter == "kernel"
        assert file_digest(cache.archives / env_m["image"]["sha256"]) == (
            env_m["image"]["sha256"],
            env_m["image"]["size"],
        )
        assert (cache.archives / f"{env_m['image']['sha256']}.chunks.json").is_file()
    with prepare(chunked_store["tasks"][1]["instance_id"], chunked_store["url"], cache=cache, images=True) as p2:
        assert [r.downloaded for r in p2.results] == [True, False]
    report = cache.gc(max_bytes=0)
    assert len(report.removed) == 3 and not any(cache.archives.iterdir())


def test_tampered_chunk_is_refused_and_nothing_is_mounted(chunked_store: dict, tmp_path: Path) -> None:
    from minisandbox.manifest import pack_path
    from minisandbox.node.cache import ArtifactCorruptError

    st = chunked_store["store"]
    env_m = chunked_store["envs"][0]
    doc = json.loads(st.read_bytes(f"artifacts/env/{env_m['image']['chunks']['artifact']}"))
    pack, offset = doc["at"][0]
    victim = Path(st.path(pack_path(doc["packs"][pack][0])))  # the pack holding the first chunk
    data = bytearray(victim.read_bytes())
    data[offset + 100] ^= 0xFF
    victim.write_bytes(bytes(data))
    cache = Cache(tmp_path / "cache", budget=IOBudget(2, tmp_path / "cache" / "budget"))
    with pytest.raises(ArtifactCorruptError, match=f"{pack_path(doc['packs'][pack][0])}.*{env_m['key']}"):
        prepare(chunked_store["tasks"][0]["instance_id"], chunked_store["url"], cache=cache, images=True)
    env_layer = cache.layers / env_m["image"]["sha256"]
    assert not is_mounted(env_layer) and not (cache.archives / env_layer.name).exists()
    assert not any(cache.tmp.iterdir())
    cache.gc(max_bytes=0)
