"""Content keys: tasks that share a key share one artifact.

Keys are computed at planning time from the inputs only (see docs/design.md), so the DAG
expands over unique keys without checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from minisandbox.catalog import EnvSpec

#: Bump when the build recipe changes in a way that must rebuild every environment.
#: 2: the env artifact carries /testbed's install residue and the canonical HOME, and
#: the build warms the test collection up (docs/design.md "Environment fidelity").
#: 3: venv .pyc files compiled deterministically (pipeline/bytecode.py), so chunked images share them.
#: 4: those .pyc files in canonical marshal form (pipeline/bytecode.py), and images packed at
#: zstd level 9 instead of 15 (pipeline/pack.py IMAGE_LEVEL): other bytes than 3's.
BUILD_FORMAT = 4

_SLUG = re.compile(r"[^a-z0-9_.-]+")


def slug(name: str) -> str:
    """A filesystem- and wildcard-safe short name: lowercase, [a-z0-9_.-], <= 40 chars."""
    s = _SLUG.sub("-", name.lower()).strip("-.")
    return s[:40].rstrip("-.") or "x"


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def source_id(source: str) -> str:
    """Id of a mirror (one bare clone per source repository)."""
    return f"{slug(source.rstrip('/').split('/')[-1].removesuffix('.git'))}-{hashlib.sha256(source.encode()).hexdigest()[:8]}"


def repo_key(source: str, commit: str) -> str:
    name = _repo_name(source)
    h = hashlib.sha256(f"{source}\n{commit}".encode()).hexdigest()[:8]
    return f"repo-{slug(name)}-{commit[:12]}-{h}"


def env_canonical(spec: EnvSpec, interpreter: str | None = None) -> dict[str, Any]:
    """What an environment is: the fields that change the built venv, nothing else.
    `interpreter`: the build of its base interpreter (`pipeline.interplayer.env_key_part`), so
    another build of the same Python version gives another key."""
    out = {
        "build_format": BUILD_FORMAT,
        "python": spec.python,
        "source": spec.source,
        "commit": spec.commit,
        "requirements": sorted(spec.requirements),
        "requirements_files": list(spec.requirements_files),
        "pre_install": list(spec.pre_install),
        "install": list(spec.install),
        # the fidelity fields: only when set, so specs without them keep their keys
        **({"python_full": spec.python_full} if spec.python_full else {}),
        **({"exclude_newer": spec.exclude_newer} if spec.exclude_newer else {}),
        **({"system_packages": sorted(spec.system_packages)} if spec.system_packages else {}),
        **({"warmup": list(spec.warmup)} if spec.warmup else {}),
    }
    if interpreter is not None:
        out["interpreter"] = interpreter
    return out


def _repo_name(source: str) -> str:
    return source.rstrip("/").split("/")[-1].removesuffix(".git")


def env_key(spec: EnvSpec, interpreter: str | None = None) -> str:
    """`env-<repo>-<h16>`: the readable part names the source repo, not the spec, so two
    specs (say a SWE-smith profile and a SWE-bench version) that define the same venv
    share one key and one artifact."""
    h = hashlib.sha256(canonical_json(env_canonical(spec, interpreter)).encode()).hexdigest()[:16]
    return f"env-{slug(_repo_name(spec.source))}-{h}"
