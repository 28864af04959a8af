"""A small stand-in for Miniconda, so SWE-smith/SWE-bench commands run verbatim.

`source /opt/miniconda3/bin/activate; conda activate testbed; pytest ...` is how every
SWE-smith/SWE-bench test command starts. We have no conda: `activate` defines a `conda`
shell function whose `activate testbed` sources the venv's own activate script, and
`bin/conda` supports `conda run -n ENV CMD...`. The one place the shim is defined: the
build (`write_shim`) and every sandbox (`shim_files`) use it.

A conda environment holds its own interpreter, so a symlink to `$CONDA_PREFIX/bin/python`
still runs with the environment's packages; a venv's does not (Python looks for
`pyvenv.cfg` beside the path it was started as, so a symlink elsewhere runs the bare base
interpreter). tox-current-env does exactly that (`.tox/<env>/bin/python` -> `sys.executable`;
SWE-bench's sphinx specs run `tox --current-env`). Activation therefore also sets
`PYTHONUSERBASE` to the environment: the base interpreter then adds its site-packages as the
user site (`<base>/lib/pythonX.Y/site-packages`, the venv's own layout, `.pth` files
included), while the venv's python ignores it (a venv without system site-packages turns
the user site off).
"""

from __future__ import annotations

from pathlib import Path

from minisandbox.paths import CONDA_ROOT, VENV_PATH

ACTIVATE = f"""# minisandbox conda shim: `conda activate testbed` activates {VENV_PATH}
conda() {{
  case "$1" in
    activate)
      _env="${{2:-testbed}}"
      if [ "$_env" = base ]; then return 0; fi
      if [ ! -f "{CONDA_ROOT}/envs/$_env/bin/activate" ]; then
        echo "conda (minisandbox shim): no environment '$_env'" >&2; return 1
      fi
      VIRTUAL_ENV_DISABLE_PROMPT=1 . "{CONDA_ROOT}/envs/$_env/bin/activate"
      export CONDA_DEFAULT_ENV="$_env" CONDA_PREFIX="{CONDA_ROOT}/envs/$_env" PYTHONUSERBASE="{CONDA_ROOT}/envs/$_env" ;;
    deactivate) deactivate 2>/dev/null; unset CONDA_DEFAULT_ENV CONDA_PREFIX PYTHONUSERBASE ;;
    *) echo "conda (minisandbox shim): only 'conda activate ENV' is supported" >&2; return 1 ;;
  esac
}}
export -f conda 2>/dev/null || true
if [ -n "${{1:-}}" ]; then conda activate "$1"; fi
"""


CONDA_SCRIPT = f"""#!/bin/sh
# minisandbox conda shim: only `conda run -n ENV CMD...` works as a command; for
# `conda activate ENV` source {CONDA_ROOT}/bin/activate first (it defines a conda function).
if [ "$1" = run ]; then
  shift; env=testbed
  while [ $# -gt 0 ]; do
    case "$1" in -n|--name) env="$2"; shift 2 ;; --no-capture-output|--live-stream) shift ;; *) break ;; esac
  done
  PATH="{CONDA_ROOT}/envs/$env/bin:$PATH" VIRTUAL_ENV="{CONDA_ROOT}/envs/$env" CONDA_DEFAULT_ENV="$env" \\
    PYTHONUSERBASE="{CONDA_ROOT}/envs/$env" exec "$@"
fi
echo "conda (minisandbox shim): run 'source {CONDA_ROOT}/bin/activate' first, then 'conda $*'" >&2
exit 1
"""


def shim_files() -> list[tuple[str, str, int]]:
    """(path inside the sandbox, content, mode) of every shim file a sandbox gets."""
    return [
        (f"{CONDA_ROOT}/bin/activate", ACTIVATE, 0o755),
        (f"{CONDA_ROOT}/etc/profile.d/conda.sh", ACTIVATE, 0o644),
        (f"{CONDA_ROOT}/bin/conda", CONDA_SCRIPT, 0o755),
    ]


def write_shim(bin_dir: Path) -> Path:
    """Write `activate` into `bin_dir` (to be bound at /opt/miniconda3/bin)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "activate"
    path.write_text(ACTIVATE)
    path.chmod(0o755)
    return path
