#!/usr/bin/env python3
"""The `minisandbox` command as scripts/setup.sh installs it (over the console script the
installer makes; scripts/install_launcher.py writes it): the same `minisandbox.cli.main`,
but a `run` asks the node-local helper before the interpreter imports `site`.

Why: through a running helper the `run` process only hands its call over
(`minisandbox.cli.helperclient`, built-in modules only), so the interpreter's start is
most of its CPU, and `site` (the environment's site-packages, its .pth files,
`sitecustomize`) is a large part of that start which the client does not need.
install_launcher.py writes this file with the first line `#!<the environment's python> -S`
and SITE_PATHS set to the entries `site` adds to sys.path in that environment, so the client
finds the package where a full start would. When no helper takes the call, and for every
other command, `site.main()` then runs as at a normal start and `minisandbox.cli.main`
does the rest.

Where the environment changed since (`site` no longer adds exactly SITE_PATHS), the
modules imported before `site` are dropped and the command starts over as the console
script would. A client that found the package elsewhere than a helper did computes another
socket name (its digest covers the package directory), so no helper of other code serves it.
"""

import sys

#: The entries `site` adds to sys.path in this environment (written by install_launcher.py).
SITE_PATHS: list[str] = []


def _through_helper(argv: list[str]) -> tuple[int | None, bool]:
    """(exit status of `minisandbox ARGV` run by the node-local helper, or None when this
    process must run it; whether the helper was asked)."""
    try:
        from minisandbox import cli

        if cli._command_word(argv) != "run":
            return None, False
        from minisandbox.cli import helperclient
    except ImportError:  # not found without `site`: the full start finds it
        return None, False
    return helperclient.try_run(argv), True


def main() -> int:
    """Hand a `run` to the helper before `site`; otherwise start as the console script."""
    argv = sys.argv[1:]
    base = list(sys.path)
    expected = base + [p for p in SITE_PATHS if p not in base]
    sys.path[:] = expected
    code, asked = _through_helper(argv)
    if code is not None:
        return code
    sys.path[:] = base
    import site

    site.main()
    if sys.path != expected:  # another environment than measured: import it all afresh
        for name in [m for m in sys.modules if m == "minisandbox" or m.startswith("minisandbox.")]:
            del sys.modules[name]
        asked = False
    from minisandbox.cli import main as cli_main

    return cli_main(client_tried=asked)


if __name__ == "__main__":
    sys.exit(main())
