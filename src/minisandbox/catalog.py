"""Environment specs: how to build, install and test one environment.

Specs live in `config/catalog/*.yaml` (generated for SWE-smith and SWE-bench by
`scripts/gen_catalog.py`, hand-written for the bundled set). A task is matched to its spec
by `spec_name_for(record)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

import yaml

from .records import TaskRecord

DEFAULT_TEST_CMD = (
    "source /opt/miniconda3/bin/activate; conda activate testbed; "
    "pytest --disable-warnings --color=no --tb=no --verbose"
)


@dataclass(frozen=True)
class EnvSpec:
    name: str
    kind: str  # swesmith | swebench | bundled
    source: str
    commit: str | None
    python: str
    requirements: tuple[str, ...] = ()
    requirements_files: tuple[str, ...] = ()
    pre_install: tuple[str, ...] = ()
    install: tuple[str, ...] = ("python -m pip install -e .",)
    test_cmd: str = DEFAULT_TEST_CMD
    log_parser: str = "pytest"
    timeout: int = 90
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, origin: str = "") -> "EnvSpec":
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        missing = [k for k in ("name", "kind", "source", "python") if not data.get(k)]
        if missing:
            raise ValueError(f"{origin}: spec {data.get('name', '?')!r} lacks {', '.join(missing)}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                continue
            if key in ("requirements", "requirements_files", "pre_install", "install"):
                value = tuple(value or ())
            kwargs[key] = value
        kwargs["python"] = str(kwargs["python"])
        kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("requirements", "requirements_files", "pre_install", "install"):
            d[k] = list(d[k])
        return d

    def with_commit(self, commit: str) -> "EnvSpec":
        return replace(self, commit=commit)


class Catalog:
    """All specs by name, loaded from one or more YAML files."""

    def __init__(self, specs: Iterable[EnvSpec]):
        self.specs: dict[str, EnvSpec] = {}
        for s in specs:
            if s.name in self.specs:
                raise ValueError(f"duplicate environment spec {s.name!r} in catalog")
            self.specs[s.name] = s

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> "Catalog":
        specs: list[EnvSpec] = []
        for p in paths:
            path = Path(p)
            if not path.exists():
                raise FileNotFoundError(f"catalog file {path} does not exist; check --config catalog=...")
            data = yaml.safe_load(path.read_text()) or {}
            for entry in data.get("specs", []):
                specs.append(EnvSpec.from_dict(entry, origin=str(path)))
        return cls(specs)

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: str) -> bool:
        return name in self.specs

    def __getitem__(self, name: str) -> EnvSpec:
        return self.specs[name]


def spec_name_for(record: TaskRecord) -> str:
    """SWE-smith: the profile name; SWE-bench: `owner/repo@version`."""
    if record.format == "swesmith":
        return record.swesmith_profile
    return f"{record.repo}@{record.version}"


def spec_for(catalog: Catalog, record: TaskRecord) -> EnvSpec:
    """The spec a task builds with; SWE-bench specs take the task's environment_setup_commit."""
    name = spec_name_for(record)
    if name not in catalog:
        raise KeyError(f"no environment spec {name!r} in the catalog (task {record.instance_id})")
    spec = catalog[name]
    if record.format == "swebench":
        spec = spec.with_commit(record.environment_setup_commit)
    if not spec.commit:
        raise KeyError(f"spec {name!r} has no commit and task {record.instance_id} gives none")
    return spec


def task_commit(spec: EnvSpec, record: TaskRecord) -> str:
    """The commit whose tree the task starts from (SWE-smith: the profile commit)."""
    return record.base_commit if record.format == "swebench" else str(spec.commit)
