"""A two-line stand-in for Miniconda, so SWE-smith/SWE-bench commands run verbatim.

`source /opt/miniconda3/bin/activate; conda activate testbed; pytest ...` is how every
reference test command starts. We have no conda: `activate` defines a `conda` shell
function whose `activate testbed` sources the venv's own activate script.
"""

from __future__ import annotations

from pathlib import Path

from .paths import CONDA_ROOT, VENV_PATH

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
      export CONDA_DEFAULT_ENV="$_env" CONDA_PREFIX="{CONDA_ROOT}/envs/$_env" ;;
    deactivate) deactivate 2>/dev/null; unset CONDA_DEFAULT_ENV CONDA_PREFIX ;;
    *) echo "conda (minisandbox shim): only 'conda activate ENV' is supported" >&2; return 1 ;;
  esac
}}
export -f conda 2>/dev/null || true
if [ -n "${{1:-}}" ]; then conda activate "$1"; fi
"""


def write_shim(bin_dir: Path) -> Path:
    """Write `activate` into `bin_dir` (to be bound at /opt/miniconda3/bin)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "activate"
    path.write_text(ACTIVATE)
    path.chmod(0o755)
    return path
