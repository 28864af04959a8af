"""Host libraries: what `ldd` says an interpreter and extension modules load from the host,
and the one-line error a node gives when one is missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from minisandbox.sandbox import hostlibs, interpreters
from minisandbox.sandbox.hostlibs import (
    MissingHostLibrary,
    add_packages,
    check_host_libs,
    ldd_host_libs,
    shared_objects,
)


def _pyenv() -> interpreters.Interpreter:
    found = [
        i
        for i in interpreters.available()
        if i.kind == interpreters.PYENV and tuple(map(int, i.version.split("."))) >= (3, 6)
    ]
    if not found:
        pytest.skip("no pyenv CPython 3 on this machine")
    return found[0]


def test_interpreter_host_libs_exclude_its_own_prefix() -> None:
    interp = _pyenv()
    prefix = Path(interp.prefix)
    files = [Path(f) for f in interpreters.build_files(interp)]
    files += shared_objects(prefix / "lib" / f"python{interp.minor}" / "lib-dynload")
    libs = add_packages(ldd_host_libs(files, [prefix]))
    names = {lib["name"] for lib in libs}
    assert "libc.so.6" in names
    assert not any(n.startswith("libpython") for n in names)  # inside the layer, not a host library
    assert all(not lib["path"].startswith(str(prefix)) and os.path.exists(lib["path"]) for lib in libs)
    by_name = {lib["name"]: lib for lib in libs}
    assert by_name["libc.so.6"].get("package") == "libc6"  # Debian: dpkg names the package
    if any(f.name.startswith("_ssl.") for f in files):
        assert by_name["libssl.so.3"]["used_by"].startswith("_ssl.")
    check_host_libs(libs, "environment env-demo")  # all present here: no error


def test_missing_library_is_one_line_naming_it() -> None:
    libs = [
        {"name": "libc.so.6", "path": "/lib/x86_64-linux-gnu/libc.so.6"},
        {
            "name": "libminisandbox-gone.so.7",
            "path": "/usr/lib/x86_64-linux-gnu/libminisandbox-gone.so.7",
            "used_by": "_gone.cpython-310-x86_64-linux-gnu.so",
            "package": "libminisandbox-gone7",
        },
    ]
    with pytest.raises(MissingHostLibrary) as exc:
        check_host_libs(libs, "environment env-demo-0123")
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("environment env-demo-0123 needs host library libminisandbox-gone.so.7 for _gone.")
    assert "Debian package libminisandbox-gone7" in msg and "install it" in msg


@pytest.mark.parametrize(
    "bad",
    [
        "libc.so.6",
        [{"name": "../../etc/passwd", "path": "/etc/passwd"}],
        [{"name": "libc.so.6", "path": "relative/libc.so.6"}],
        [{"name": "libc.so.6", "path": "/lib/../etc/x.so"}],
    ],
)
def test_malformed_host_libs_are_refused(bad) -> None:
    with pytest.raises(MissingHostLibrary, match="env-x.*host_libs.*re-publish"):
        check_host_libs(bad, "env-x")


def test_venv_extension_modules(tmp_path: Path) -> None:
    """A library bundled next to an extension module (wheels' `.libs` dirs, $ORIGIN) is in
    the layer; only what resolves outside counts."""
    interp = _pyenv()
    dynload = Path(interp.prefix) / "lib" / f"python{interp.minor}" / "lib-dynload"
    ssl = next(dynload.glob("_ssl.*.so"), None)
    if ssl is None:
        pytest.skip("this interpreter has no _ssl module")
    venv = tmp_path / "venv" / "lib" / "site-packages"
    venv.mkdir(parents=True)
    (venv / ssl.name).write_bytes(ssl.read_bytes())
    libs = ldd_host_libs(shared_objects(tmp_path / "venv"), [tmp_path / "venv"])
    assert {"libssl.so.3", "libcrypto.so.3"} <= {lib["name"] for lib in libs}


def _without_addresses(lines: list[str]) -> list[str]:
    return [re.sub(r"\(0x[0-9a-f]+\)", "(0x)", line) for line in lines]


@pytest.mark.parametrize("loader", ["native", "failing"])
def test_traces_are_what_ldd_prints(loader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader's own trace gives, file by file, the lines ldd prints for the file; with
    a loader whose trace fails every file goes through ldd itself, to the same lines."""
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("no ldd on this machine")
    interp = _pyenv()
    dynload = Path(interp.prefix) / "lib" / f"python{interp.minor}" / "lib-dynload"
    files = [str(p) for p in shared_objects(dynload)[:6]] + [str(f) for f in interpreters.build_files(interp)]
    if loader == "failing":
        monkeypatch.setattr(hostlibs, "_native_loader", lambda _ldd: "/nonexistent/ld.so")
    else:
        assert hostlibs._native_loader(ldd)  # this machine's programs name one
    traces = hostlibs._traces(ldd, files)
    for f in files:
        alone = subprocess.run([ldd, f], capture_output=True, text=True, env={"LC_ALL": "C"}).stdout.splitlines()
        assert _without_addresses(traces[f]) == _without_addresses(alone), f
    assert any("libc.so.6 =>" in line for line in traces[files[0]])
