"""Attack: an archive's symlinks make the sandbox set-up write or mount on the host.
(1) `bin/activate -> <host file>` in a layer mounted over /opt/miniconda3: the conda shim
write would overwrite the host file; (2) a home layer with `.pyenv -> <host dir>`: the
interpreter bind at /root/.pyenv/versions/X would create directories on the host. The
schema refuses those mount paths already (test_store_tampering); here the layers are
given to the sandbox directly, to check the set-up itself never follows them."""

from __future__ import annotations

import os

import pytest

from tests.security.conftest import MODES

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_setup_never_follows_layer_symlinks(attack):
    base = attack.base
    (base / "host.txt").write_text("host file\n")
    (base / "hostdir").mkdir()
    evil = base / "conda"
    (evil / "bin").mkdir(parents=True)
    os.symlink(str(base / "host.txt"), evil / "bin" / "activate")
    home = base / "home"
    home.mkdir()
    os.symlink(str(base / "hostdir"), home / ".pyenv")
    interp = base / "interp"
    (interp / "bin").mkdir(parents=True)
    if attack.mode == "rootless":
        os.system(f"chown -R msbtest:msbtest {base}")
    out = attack(
        """
        from minisandbox.sandbox import rootfs
        errors = {}
        for name, layers, binds in (
                ("activate", [Layer(P["conda"], "/opt/miniconda3")], []),
                ("pyenv", [Layer(P["home"], "/root")], [rootfs.Bind(P["interp"], "/root/.pyenv/versions/3.10.13")])):
            try:
                with Sandbox(layers, binds=binds) as sb:
                    errors[name] = "created"
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}"
        with Sandbox([Layer(P["repo"], "/testbed")]) as sb:  # the legitimate path
            shim = sb.execute("head -c 40 /opt/miniconda3/bin/activate").output
        out = {"errors": errors, "shim": shim}
    """,
        conda=str(evil),
        home=str(home),
        interp=str(interp),
    )
    assert "symlink" in out["errors"]["activate"] and "refusing" in out["errors"]["activate"]
    assert "symlink" in out["errors"]["pyenv"] and ".pyenv" in out["errors"]["pyenv"]
    assert (base / "host.txt").read_text() == "host file\n"
    assert os.listdir(base / "hostdir") == []
    assert out["shim"].startswith("# minisandbox conda shim")


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_stacked_layer_subdir_never_follows_archive_symlinks(attack):
    """An env archive whose install-residue dir (`.minisandbox/testbed`, stacked over
    /testbed) is reached through a symlink to a host directory: overlayfs would resolve it on
    the host and show that directory at /testbed. The layer's sub-path is walked without
    following symlinks; a real residue dir is still stacked."""
    base = attack.base
    (base / "hostdir" / "testbed").mkdir(parents=True)
    (base / "hostdir" / "testbed" / "host-secret.txt").write_text("host secret\n")
    evil = base / ("e" * 64)  # a restored layer is named by its digest in the node cache
    evil.mkdir()
    os.symlink(str(base / "hostdir"), evil / ".minisandbox")
    good = base / ("a" * 64)
    (good / ".minisandbox" / "testbed").mkdir(parents=True)
    (good / ".minisandbox" / "testbed" / "residue.txt").write_text("from the build\n")
    if attack.mode == "rootless":
        os.system(f"chown -R msbtest:msbtest {base}")
    out = attack(
        """
        try:
            with Sandbox([Layer(P["repo"], "/testbed", over=(P["evil"] + "/.minisandbox/testbed",))]) as sb:
                seen = sb.execute("ls /testbed").output
            evil = "created: " + seen
        except Exception as e:
            evil = f"{type(e).__name__}: {e}"
        with Sandbox([Layer(P["repo"], "/testbed", over=(P["good"] + "/.minisandbox/testbed",))]) as sb:
            good = sb.execute("cat /testbed/residue.txt /testbed/code.py").output
        out = {"evil": evil, "good": good}
    """,
        evil=str(evil),
        good=str(good),
    )
    assert "host-secret" not in out["evil"]
    assert "symlink" in out["evil"] and "refusing" in out["evil"]
    assert out["good"] == "from the build\nVALUE = 1\n"
