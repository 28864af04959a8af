"""Debian packages a spec declares: checked on the host, one-line errors naming them."""

from __future__ import annotations

import shutil

import pytest

from minisandbox.errors import MinisandboxError
from minisandbox.syspkgs import MissingSystemPackages, missing, require, validate_names

pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian host")


def test_installed_packages_are_not_missing() -> None:
    assert missing(["bash", "git", "bash"]) == []
    assert missing([]) == []
    require(["git"], "environment x")


def test_missing_packages_are_named_in_one_line() -> None:
    assert missing(["git", "minisandbox-no-such-package", "bash:amd64"]) == ["minisandbox-no-such-package"]
    with pytest.raises(MissingSystemPackages) as exc:
        require(["minisandbox-no-such-package", "git", "another-missing-pkg"], "environment demo")
    msg = str(exc.value)
    assert "\n" not in msg and isinstance(exc.value, MinisandboxError)
    assert "environment demo" in msg and "minisandbox-no-such-package, another-missing-pkg" in msg
    assert "apt-get install minisandbox-no-such-package another-missing-pkg" in msg


def _virtual_names() -> tuple[set[str], set[str]]:
    """(names installed packages provide, names of installed packages), read from dpkg."""
    import subprocess

    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev}\t${Package}\t${Provides}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    provided, real = set(), set()
    for line in out.splitlines():
        status, package, provides = line.split("\t")
        if status.startswith("ii"):
            real.add(package)
            provided.update(p.split()[0] for p in provides.split(",") if p.strip())
    return provided - real, real


def test_a_virtual_package_provided_by_an_installed_one_is_not_missing() -> None:
    """apt installs a virtual name (`libxslt-dev`) through a package that provides it
    (`libxslt1-dev`); dpkg then knows no installed package of that name, and the spec that
    copied the apt-get line must still pass the check."""
    virtual, real = _virtual_names()
    if not virtual:
        pytest.skip("no installed package provides a virtual name on this host")
    name = sorted(virtual)[0]
    assert name not in real
    assert missing([name, "git"]) == []
    assert missing([name, "minisandbox-no-such-package"]) == ["minisandbox-no-such-package"]
    require([name], "environment demo")


@pytest.mark.parametrize("bad", ["Foo", "a b", "-x", "", "x;rm -rf /", 3])
def test_names_are_validated(bad) -> None:
    with pytest.raises(ValueError, match="not a Debian package name"):
        validate_names([bad], "spec demo")
    assert validate_names(["libxml2-dev", "g++", "openjdk-17-jre:amd64"], "spec demo") == [
        "libxml2-dev",
        "g++",
        "openjdk-17-jre:amd64",
    ]


def test_a_node_remembers_a_passed_check_while_dpkg_is_unchanged(tmp_path, monkeypatch) -> None:
    """`run` checks its environment's packages on every call; the node cache remembers a
    check that passed (asking dpkg-query costs ~12 ms of CPU) until dpkg's database changes,
    and never remembers one that failed."""
    from minisandbox import syspkgs
    from minisandbox.node import runtime
    from minisandbox.node.verified import Verified

    status = tmp_path / "status"
    status.write_text("Package: git\n")
    monkeypatch.setattr(syspkgs, "DPKG_STATUS", str(status))
    asked: list[list[str]] = []

    def counted(names, what):
        asked.append(list(names))
        return require(names, what)

    monkeypatch.setattr(runtime, "require_system_packages", counted)
    verified = Verified(tmp_path / "verified")
    env = {"key": "e", "system_packages": ["git", "bash"]}
    runtime.check_host(env, "task t", verified)
    runtime.check_host(env, "task t", verified)
    runtime.check_host({"key": "e", "system_packages": ["bash", "git"]}, "task t", verified)
    assert asked == [["git", "bash"]]
    runtime.check_host({"key": "e", "system_packages": ["git"]}, "task t", verified)  # another set: asked
    assert len(asked) == 2
    status.write_text("Package: git\nPackage: bash\n")  # dpkg changed something: asked again
    runtime.check_host(env, "task t", verified)
    assert len(asked) == 3
    runtime.check_host(env, "task t", None)  # no node cache: always asked
    assert len(asked) == 4
    bad = {"key": "e", "system_packages": ["minisandbox-no-such-package"]}
    for _ in range(2):
        with pytest.raises(MissingSystemPackages):
            runtime.check_host(bad, "task t", verified)
    assert len(asked) == 6
