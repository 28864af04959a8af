"""The one exception root of minisandbox.

Every error the project raises on purpose derives from `MinisandboxError`, so callers (and
`minisandbox.cli.main`) can tell "bad input or environment, here is what to do" from a bug:
the CLI prints one line for a `MinisandboxError` and a full traceback for anything else.
Subsystem errors keep the builtin base callers already catch (``class StoreError(
MinisandboxError, RuntimeError)``). They live next to the code that raises them; only the
errors that more than one subsystem raises are defined here.
"""


class MinisandboxError(Exception):
    """Root of every project error; the message says what failed and what to do next."""


class SandboxError(MinisandboxError, RuntimeError):
    """A sandbox could not be set up or a command could not be started in it.

    Defined here rather than in `minisandbox.sandbox.rootfs` because rootfs also runs as a
    stdlib-only script (``python -I -S``) that cannot import the package; it re-exports this
    class when imported normally.
    """


class SizeError(MinisandboxError, ValueError):
    """A size such as ``512M`` could not be parsed."""
