"""Root nodes: layers as loop-mounted squashfs images instead of unpacked trees."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from minisandbox.node.cache import Cache
from minisandbox.node.iobudget import IOBudget
from minisandbox.paths import REPO_PATH, VENV_PATH
from minisandbox.node.restore import can_mount_images, is_mounted
from minisandbox.node.runtime import prepare
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
