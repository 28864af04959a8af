#!/usr/bin/env bash
# Install this checkout's Snakemake cluster profile under the bare name `slurm`, where
# Snakemake 9 looks a bare `--profile NAME` up: the current directory, then
# ${XDG_CONFIG_HOME:-~/.config}/snakemake/NAME, then /etc/xdg/snakemake/NAME
# (profiles/NAME in a checkout is only searched by --workflow-profile).
#
# The installed profile is a symlink to profiles/slurm, so profiles/slurm/config.yaml stays
# the one place to edit. Idempotent: an existing link to some minisandbox checkout's
# profiles/slurm is re-pointed (and said so); anything else there (a user's own profile)
# is left alone with a message, unless MINISANDBOX_REPLACE_PROFILES=1, which moves it
# aside to NAME.bak.<date> first.
#
#   scripts/install-profiles.sh            # user config dir (what setup.sh runs)
#   MINISANDBOX_PROFILE_DIR=/etc/xdg/snakemake scripts/install-profiles.sh   # all users
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST_DIR="${MINISANDBOX_PROFILE_DIR:-${XDG_CONFIG_HOME:-$HOME/.config}/snakemake}"
say() { echo "install-profiles: $*"; }

install_one() {
  local name="$1" src="$ROOT/profiles/$1" dest="$DEST_DIR/$1"
  [ -f "$src/config.yaml" ] || { echo "install-profiles: $src/config.yaml missing" >&2; return 1; }
  mkdir -p "$DEST_DIR"
  if [ "$(readlink "$dest" 2>/dev/null)" = "$src" ]; then
    say "$dest -> $src (already)"
    return 0
  fi
  if [ ! -e "$dest" ] && [ ! -L "$dest" ]; then
    ln -s "$src" "$dest"
    say "installed $dest -> $src"
    return 0
  fi
  local old
  old="$(readlink "$dest" 2>/dev/null || true)"
  case "$old" in
    */profiles/"$name")
      if grep -q '^name = "minisandbox"' "${old%/profiles/$name}/pyproject.toml" 2>/dev/null || [ ! -e "$old" ]; then
        ln -sfn "$src" "$dest"
        say "re-pointed $dest -> $src (was $old)"
        return 0
      fi ;;
  esac
  if [ "${MINISANDBOX_REPLACE_PROFILES:-0}" = 1 ]; then
    local bak
    bak="$dest.bak.$(date -u +%Y%m%dT%H%M%SZ)"
    mv "$dest" "$bak"
    ln -s "$src" "$dest"
    say "moved your profile $dest to $bak and installed $dest -> $src"
    return 0
  fi
  say "left $dest alone (your own profile). Use \`snakemake --profile $src\`, or rerun" \
      "with MINISANDBOX_REPLACE_PROFILES=1 to move yours aside."
}

install_one slurm
