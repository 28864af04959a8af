#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for minisandbox: system tools, then the package with
# all its extras. Idempotent. Run as root (or with sudo for the apt part).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(git tar zstd util-linux iproute2 procps psmisc passwd python3 patch squashfs-tools)
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
  fi
fi

PY="${PYTHON:-python3}"
"$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$PY" -m pip install -q -e '.[all]'
# pyenv: make the new console scripts (snakemake, minisandbox, ray, ...) visible as shims.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
echo "setup: done ($("$PY" -m snakemake --version | head -1) snakemake, $("$PY" -c 'import minisandbox; print(minisandbox.__version__)') minisandbox)"
