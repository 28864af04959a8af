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


@pytest.mark.parametrize("bad", ["Foo", "a b", "-x", "", "x;rm -rf /", 3])
def test_names_are_validated(bad) -> None:
    with pytest.raises(ValueError, match="not a Debian package name"):
        validate_names([bad], "spec demo")
    assert validate_names(["libxml2-dev", "g++", "openjdk-17-jre:amd64"], "spec demo") == [
        "libxml2-dev",
        "g++",
        "openjdk-17-jre:amd64",
    ]
