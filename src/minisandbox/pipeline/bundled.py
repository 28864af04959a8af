"""The bundled default task set: small real Python projects turned into local git repos.

The default config must run with no GitHub access, so its repositories are built here
from PyPI source distributions committed under `config/bundled/sources/`. Every commit
is made with fixed author, committer, dates and an isolated git config, so the commit
hashes are the same on every machine and can be pinned in `config/catalog/bundled.yaml`
and in the task records (`config/bundled/tasks*.jsonl`).

The recipe (`config/bundled/repos.yaml`, written by `scripts/make_bundled_tasks.py`)
lists per repository the sdist, the expected `main` head, and extra branches whose
commits are `main` plus one patch (the SWE-bench-form base commits: a bug introduced and
the tests that catch it removed).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from minisandbox.errors import MinisandboxError
from minisandbox.paths import project_root

#: Where the default workflow materialises the repos (relative to its working directory).
DEFAULT_DEST = "results/bundled/repos"

#: Fixed identity and date of every bundled commit: the hashes depend on them.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "minisandbox bundled",
    "GIT_AUTHOR_EMAIL": "bundled@minisandbox.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "minisandbox bundled",
    "GIT_COMMITTER_EMAIL": "bundled@minisandbox.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}

#: Written into every bundled repo so that builds and test runs leave `git status` clean.
GITIGNORE = "*.egg-info/\n__pycache__/\n*.pyc\n.pytest_cache/\nbuild/\ndist/\n"


class BundledError(MinisandboxError, RuntimeError):
    """A bundled repo could not be built or does not match its pinned commit."""


@dataclass(frozen=True)
class Branch:
    name: str
    patch: str  # path relative to the bundled dir, applied on top of `main`
    message: str
    commit: str | None = None


@dataclass(frozen=True)
class RepoRecipe:
    name: str  # directory name under dest, e.g. "jpvanhal__inflection"
    upstream: str  # documentation only: never fetched
    sdist: str  # path relative to the bundled dir
    sdist_sha256: str
    message: str
    head: str | None = None  # expected commit of `main`
    branches: tuple[Branch, ...] = field(default_factory=tuple)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RepoRecipe:
        branches = tuple(Branch(**b) for b in d.get("branches") or ())
        return cls(
            name=d["name"],
            upstream=d.get("upstream", ""),
            sdist=d["sdist"],
            sdist_sha256=d["sdist_sha256"],
            message=d["message"],
            head=d.get("head"),
            branches=branches,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "upstream": self.upstream,
            "sdist": self.sdist,
            "sdist_sha256": self.sdist_sha256,
            "message": self.message,
            "head": self.head,
            "branches": [vars(b).copy() for b in self.branches],
        }

    def expected(self) -> dict[str, str | None]:
        """Ref name -> pinned commit (None while the recipe is being generated)."""
        out: dict[str, str | None] = {"main": self.head}
        out.update({b.name: b.commit for b in self.branches})
        return out


def bundled_dir() -> Path:
    return project_root() / "config" / "bundled"


def load_recipes(path: Path | None = None) -> list[RepoRecipe]:
    path = path or bundled_dir() / "repos.yaml"
    if not path.exists():
        raise BundledError(
            f"{path} does not exist; run `.venv/bin/python scripts/make_bundled_tasks.py` to generate it"
        )
    data = yaml.safe_load(path.read_text()) or {}
    return [RepoRecipe.from_dict(r) for r in data.get("repos", [])]


def _git_env() -> dict[str, str]:
    """An environment that ignores the user's and system git config (hooks, signing, crlf)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_IDENTITY)
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
    return env


def git(repo: Path, *args: str, input: bytes | None = None, raw: bool = False) -> str:
    """Run one git command in `repo` with the fixed identity; raise naming the command.

    Output is stripped unless `raw` (diffs must keep their trailing whitespace lines)."""
    cmd = ["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.fileMode=true", *args]
    proc = subprocess.run(cmd, cwd=repo, env=_git_env(), input=input, capture_output=True)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise BundledError(f"{repo}: git {' '.join(args)} failed: {err[-1] if err else proc.returncode}")
    out = proc.stdout.decode(errors="replace")
    return out if raw else out.strip()


def _extract_sdist(sdist: Path, target: Path) -> None:
    """Unpack an sdist without its top-level directory, dropping generated `*.egg-info`."""
    with tarfile.open(sdist) as tf:
        for member in tf.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 2 or any(p.endswith(".egg-info") for p in parts[1:]):
                continue
            rel = Path(*parts[1:])
            if member.isdir():
                (target / rel).mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                out = target / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                data = tf.extractfile(member)
                assert data is not None
                out.write_bytes(data.read())
                out.chmod(0o755 if member.mode & 0o100 else 0o644)
            else:
                raise BundledError(f"{sdist}: unsupported member {member.name} (links are not allowed)")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_repo(recipe: RepoRecipe, target: Path, base: Path | None = None) -> dict[str, str]:
    """Create the repo at `target` (must not exist); return ref -> commit. No pin checks."""
    base = base or bundled_dir()
    sdist = base / recipe.sdist
    if not sdist.exists():
        raise BundledError(f"{sdist} missing (repo {recipe.name}); restore config/bundled/sources from git")
    if _sha256(sdist) != recipe.sdist_sha256:
        raise BundledError(f"{sdist}: sha256 differs from config/bundled/repos.yaml; restore the file from git")
    target.mkdir(parents=True)
    git(target, "init", "-q", "-b", "main")
    _extract_sdist(sdist, target)
    (target / ".gitignore").write_text(GITIGNORE)
    git(target, "add", "-A")
    git(target, "commit", "-q", "--no-verify", "-m", recipe.message)
    for br in recipe.branches:
        patch = base / br.patch
        if not patch.exists():
            raise BundledError(f"{patch} missing (branch {br.name} of {recipe.name})")
        git(target, "checkout", "-q", "-b", br.name, "main")
        git(target, "apply", "--index", "--whitespace=nowarn", str(patch))
        git(target, "commit", "-q", "--no-verify", "-m", br.message)
    git(target, "checkout", "-q", "main")
    return refs(target, recipe)


def refs(repo: Path, recipe: RepoRecipe) -> dict[str, str]:
    """Current commit of each ref the recipe names (missing refs are left out)."""
    out: dict[str, str] = {}
    for ref in recipe.expected():
        try:
            out[ref] = git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{ref}^{{commit}}")
        except BundledError:
            continue
    return out


def _catalog_pins(catalog: Path) -> dict[str, str]:
    """Directory name -> pinned commit of the `bundled` specs with a commit."""
    data = yaml.safe_load(catalog.read_text()) or {}
    pins: dict[str, str] = {}
    for spec in data.get("specs", []):
        if spec.get("kind") == "bundled" and spec.get("commit"):
            pins[Path(spec["source"]).name] = spec["commit"]
    return pins


def _check(repo: Path, recipe: RepoRecipe, pins: dict[str, str]) -> None:
    expected = recipe.expected()
    if recipe.name in pins and pins[recipe.name] != expected["main"]:
        raise BundledError(
            f"config/catalog/bundled.yaml pins {recipe.name} at {pins[recipe.name]} but config/bundled/repos.yaml"
            f" says {expected['main']}; regenerate both with scripts/make_bundled_tasks.py"
        )
    have = refs(repo, recipe)
    for ref, want in expected.items():
        if want is None:
            raise BundledError(f"config/bundled/repos.yaml: {recipe.name} ref {ref} has no pinned commit")
        if have.get(ref) != want:
            raise BundledError(
                f"{repo}: ref {ref} is at {have.get(ref, 'nothing')}, expected pinned {want}; "
                f"delete {repo} and rerun (or check git and the sdist under config/bundled/sources)"
            )


def materialize(dest: str | Path = DEFAULT_DEST, *, catalog: Path | None = None) -> dict[str, Path]:
    """Create every bundled repo under `dest` (idempotent); return name -> repo path.

    Existing repos whose refs match the pins are left alone; a repo that differs raises
    (it is never silently replaced). New repos are built in a temporary directory and
    renamed into place, so a crash or a concurrent run never leaves a half-built repo.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    catalog = catalog or project_root() / "config" / "catalog" / "bundled.yaml"
    pins = _catalog_pins(catalog) if catalog.exists() else {}
    out: dict[str, Path] = {}
    for recipe in load_recipes():
        target = dest / recipe.name
        if not target.exists():
            tmp = dest / f".{recipe.name}.tmp-{uuid.uuid4().hex[:8]}"
            try:
                build_repo(recipe, tmp)
                _check(tmp, recipe, pins)
                try:
                    tmp.rename(target)
                except OSError:
                    if not target.exists():
                        raise
                    # another process won the race; its repo is checked below
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp)
        elif not (target / ".git").exists():
            raise BundledError(f"{target} exists but is not a git repo; delete it and rerun")
        _check(target, recipe, pins)
        out[recipe.name] = target
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The raw records of one bundled task file."""
    import json

    return [json.loads(line) for line in io.StringIO(path.read_text()) if line.strip()]
