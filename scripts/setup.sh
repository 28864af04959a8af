#!/usr/bin/env bash
# Set up a machine for minisandbox (tested on a fresh Debian 12 whose only Python is
# Debian's python3, and on one with pyenv first on PATH). Idempotent.
#
#   1. Debian packages (as root; otherwise the missing ones are named).
#   2. uv from PyPI, into its own venv (Debian's python3 refuses `pip install` into
#      itself): ${XDG_DATA_HOME:-~/.local/share}/minisandbox/uv-venv.
#   3. The project's environment, made by uv from the committed uv.lock: .venv/ in the
#      checkout, with every extra (Slurm executor, S3, integrations, tests), byte-compiled
#      (the installed packages and the checkout's src/): where PYTHONDONTWRITEBYTECODE is
#      set (CI, containers) Python would otherwise compile every module on every call.
#   4. `minisandbox`, `snakemake` and `uv` linked into a directory on PATH
#      (/usr/local/bin as root, ~/.local/bin otherwise; MINISANDBOX_BIN_DIR overrides).
#      A file there that this set-up did not make is left alone, and said so; a
#      dangling link (its checkout was removed) is re-pointed.
#   5. The Snakemake profile `slurm` installed where Snakemake finds a bare name
#      (scripts/install-profiles.sh), so `snakemake --profile slurm` works.
#
# Knobs: PYTHON (interpreter for .venv, default: python3 on PATH), MINISANDBOX_UV (a uv
# binary to use instead of the PyPI one), MINISANDBOX_BIN_DIR, MINISANDBOX_NO_PROFILES=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
say() { echo "setup: $*"; }

# --------------------------------------------------------------------- 1. Debian packages
# squashfs-tools builds layer images; squashfuse + fuse3 mount them on non-root nodes
# bubblewrap: the one-shot sandbox bench/ measures minisandbox against (bench/bench_cli.py)
APT_PKGS=(git tar zstd util-linux iproute2 procps psmisc passwd python3 python3-venv patch squashfs-tools squashfuse fuse3
          bubblewrap)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages (install them as root): ${missing[*]}" >&2
    exit 1
  fi
fi
# Unprivileged users mount layer images with squashfuse: /dev/fuse must be usable by them.
# udev's default rule makes it 0666; machines without udev (containers, VMs) leave it 0600.
if [ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" = 600 ]; then
  chmod 0666 /dev/fuse && say "/dev/fuse made usable by unprivileged users (mode 0666, as udev does)"
fi

# --------------------------------------------------------------------- 2. uv from PyPI
DATA_HOME="${XDG_DATA_HOME:-$HOME/.local/share}/minisandbox"
UV_VENV="$DATA_HOME/uv-venv"
if [ -n "${MINISANDBOX_UV:-}" ]; then
  UV="$MINISANDBOX_UV"
else
  UV="$UV_VENV/bin/uv"
  if ! "$UV" --version >/dev/null 2>&1; then
    say "installing uv from PyPI into $UV_VENV"
    rm -rf "$UV_VENV"
    mkdir -p "$DATA_HOME"
    /usr/bin/env python3 -m venv "$UV_VENV"
    "$UV_VENV/bin/python" -m pip install -q --disable-pip-version-check 'uv>=0.5'
  fi
fi
say "$("$UV" --version)"

# --------------------------------------------------------------------- 3. project env
PY="${PYTHON:-python3}"
PY_PATH="$(command -v "$PY")" || { echo "setup: no $PY on PATH (set PYTHON=/path/to/python3.11+)" >&2; exit 1; }
export UV_PROJECT_ENVIRONMENT="$ROOT/.venv"
# Trust the machine's CA store (a site proxy's CA lives there, as for pip and git);
# UV_NATIVE_TLS is the older uv's name for the same switch.
export UV_SYSTEM_CERTS="${UV_SYSTEM_CERTS:-1}" UV_NATIVE_TLS="${UV_NATIVE_TLS:-1}"
# --locked: the environment is exactly uv.lock. A pyproject.toml edited without
# re-locking is named, then re-locked here so the set-up still works.
# --compile-bytecode: every installed module byte-compiled now, once (uv does not by default).
if ! "$UV" sync --locked --all-extras --compile-bytecode --python "$PY_PATH" --quiet 2>/tmp/.minisandbox-uv-sync.$$; then
  if grep -q -i 'lockfile.*needs to be updated\|--locked' /tmp/.minisandbox-uv-sync.$$; then
    say "uv.lock does not match pyproject.toml: re-locking (commit the new uv.lock)"
    "$UV" sync --all-extras --compile-bytecode --python "$PY_PATH" --quiet
  else
    cat /tmp/.minisandbox-uv-sync.$$ >&2
    rm -f /tmp/.minisandbox-uv-sync.$$
    exit 1
  fi
fi
rm -f /tmp/.minisandbox-uv-sync.$$
# The project itself is an editable install (its modules are read from src/, which uv does not
# compile): compile them too. A module edited later is compiled again by whoever imports it.
"$ROOT/.venv/bin/python" -m compileall -q -j 0 "$ROOT/src" >/dev/null
say "project environment $ROOT/.venv ($("$ROOT/.venv/bin/python" --version), byte-compiled)"

# --------------------------------------------------------------------- 4. commands on PATH
if [ -n "${MINISANDBOX_BIN_DIR:-}" ]; then BIN_DIR="$MINISANDBOX_BIN_DIR"
elif [ "$(id -u)" = 0 ]; then BIN_DIR=/usr/local/bin
else BIN_DIR="$HOME/.local/bin"
fi
mkdir -p "$BIN_DIR"

# ours: a link this set-up made (into some checkout's .venv/bin or the uv venv).
ours() {
  local link="$1" name="$2" target
  [ -L "$link" ] || return 1
  target="$(readlink "$link")"
  case "$target" in
    */.venv/bin/"$name") [ -f "${target%/.venv/bin/$name}/pyproject.toml" ] \
                         && grep -q '^name = "minisandbox"' "${target%/.venv/bin/$name}/pyproject.toml" ;;
    */minisandbox/uv-venv/bin/uv) [ "$name" = uv ] ;;
    *) return 1 ;;
  esac
}
link_cmd() {
  local name="$1" target="$2" link="$BIN_DIR/$1"
  if [ "$(readlink "$link" 2>/dev/null)" = "$target" ]; then return 0; fi
  if [ ! -e "$link" ] && [ ! -L "$link" ]; then
    ln -s "$target" "$link"; say "linked $link -> $target"
  elif [ -L "$link" ] && [ ! -e "$link" ]; then  # dangling (its checkout is gone): nothing to keep
    local was; was="$(readlink "$link")"
    ln -sfn "$target" "$link"; say "re-pointed dangling $link -> $target (was $was)"
  elif ours "$link" "$name"; then
    ln -sfn "$target" "$link"; say "re-pointed $link -> $target (was $(readlink "$link" 2>/dev/null))"
  else
    say "left $link alone (not made by this set-up); this checkout's is $target"
  fi
}
link_cmd minisandbox "$ROOT/.venv/bin/minisandbox"
link_cmd snakemake "$ROOT/.venv/bin/snakemake"
[ -z "${MINISANDBOX_UV:-}" ] && link_cmd uv "$UV"
case ":$PATH:" in
  *":$BIN_DIR:"*) ;;
  *) say "add $BIN_DIR to PATH (e.g. in ~/.profile) to run minisandbox and snakemake by name" ;;
esac

# --------------------------------------------------------------------- 5. Snakemake profile
if [ "${MINISANDBOX_NO_PROFILES:-0}" != 1 ]; then
  bash "$ROOT/scripts/install-profiles.sh"
fi

# pyenv: a shim named snakemake/minisandbox (from an older pip install into a pyenv
# Python) comes before $BIN_DIR on PATH; say which one the shell will run.
for c in snakemake minisandbox; do
  found="$(command -v "$c" || true)"
  case "$found" in
    */.pyenv/shims/*) say "note: '$c' on this PATH is pyenv's shim $found, not $BIN_DIR/$c" ;;
  esac
done
say "done ($("$ROOT/.venv/bin/snakemake" --version | head -1) snakemake, $("$ROOT/.venv/bin/python" -c 'import minisandbox; print(minisandbox.__version__)') minisandbox); tests: .venv/bin/python -m pytest"
