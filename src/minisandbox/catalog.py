"""Environment specs: how to build, install and test one environment.

Specs live in `config/catalog/*.yaml` (generated for SWE-smith and SWE-bench by
`scripts/gen_catalog.py`, hand-written for the bundled set). A task is matched to its spec
by `spec_name_for(record)`.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

import yaml

from minisandbox.errors import MinisandboxError
from minisandbox.logformats import LOG_PARSERS, PYTEST_PARSERS
from minisandbox.paths import project_root
from minisandbox.records import TaskRecord
from minisandbox.syspkgs import validate_names

DEFAULT_TEST_CMD = (
    "source /opt/miniconda3/bin/activate; conda activate testbed; "
    "pytest --disable-warnings --color=no --tb=no --verbose"
)


KINDS = ("swesmith", "swebench", "bundled")
REQUIRED = ("name", "kind", "source", "python")
_LIST_FIELDS = ("requirements", "requirements_files", "pre_install", "install", "system_packages", "warmup")
_FULL_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$")


class CatalogError(MinisandboxError, ValueError):
    """A catalog file or spec is unusable; the message is one line naming file and spec."""


def _unknown_key(key: object, known: Iterable[str]) -> str:
    """`'test_comand' (did you mean 'test_cmd'?)`: the closest known key, if one is close."""
    import difflib

    close = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f"{str(key)!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


#: The only top-level key of a catalog file.
TOP_LEVEL = ("specs",)


class CatalogMissing(CatalogError, FileNotFoundError):
    """A catalog file named by the configuration or `--catalog` does not exist."""


def require_catalog_files(paths: Iterable[str | Path]) -> None:
    """Raise CatalogMissing (one line) for the first catalog file that does not exist."""
    for p in paths:
        if not Path(p).is_file():
            raise CatalogMissing(
                f"catalog file {p} does not exist; check --config catalog=... or --catalog "
                f"(this checkout's catalogs: config/catalog/*.yaml)"
            )


@dataclass(frozen=True)
class EnvSpec:
    """One environment spec, validated (`from_dict`); what each field means: the catalog
    entry's model, `spec_model()`, whose fields carry the docs."""

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
    python_full: str | None = None
    exclude_newer: str | None = None
    system_packages: tuple[str, ...] = ()
    warmup: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, origin: str = "") -> EnvSpec:
        """Validate one YAML entry against `spec_model()` (pydantic, unknown keys forbidden):
        a typo such as `test_comand` is an error naming it and the closest known key;
        free-form fields go under an explicit `extra:` mapping. Any problem is one
        CatalogError line naming `origin` (file and spec number), the spec and the field."""
        where = f"{origin}: " if origin else ""
        if not isinstance(data, dict):
            raise CatalogError(f"{where}spec entry must be a mapping, got {type(data).__name__}")
        who = f"{where}spec {data.get('name', '?')!r}"
        missing = [k for k in REQUIRED if data.get(k) in (None, "")]
        if missing:
            raise CatalogError(f"{who} lacks {', '.join(missing)}; add it to the spec")
        from pydantic import ValidationError

        try:
            model = spec_model().model_validate(data)
        except ValidationError as exc:
            raise CatalogError(_spec_error(exc, who)) from None
        return cls(**{f: getattr(model, f) for f in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in _LIST_FIELDS:
            d[k] = list(d[k])
        return d

    def pinned_major(self, package: str) -> int | None:
        """The major version the spec pins `package` to (`package==X.Y...` among its
        requirements), or None when it pins none: SWE-smith profiles pin every package
        (their official images' exports), most SWE-bench specs leave pytest to the resolver."""
        prefix = f"{package.lower()}=="
        for req in self.requirements:
            text = req.replace(" ", "").lower()
            if text.startswith(prefix):
                head = text[len(prefix) :].split(".", 1)[0]
                return int(head) if head.isdigit() else None
        return None

    def with_commit(self, commit: str) -> EnvSpec:
        return replace(self, commit=commit)

    def warmup_commands(self) -> list[str]:
        """What the build runs in /testbed after the install, with network, so that data a
        suite downloads when it is imported or collected lands in the environment's layers
        (docs/design.md "Offline test data"): for pytest specs the test command with
        `--collect-only -q` appended (failure tolerated: the log says so), then the spec's
        own `warmup` commands (failure fails the build)."""
        cmds = []
        if self.log_parser in PYTEST_PARSERS and "pytest" in self.test_cmd:
            cmds.append(f"{self.test_cmd} --collect-only -q")
        return cmds + list(self.warmup)


def _strings(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of strings")
    return tuple(value)


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {type(value).__name__}")
    return value


def _one_of(choices: Iterable[str], what: str):
    def check(value: object) -> object:
        if value not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}{what}")
        return value

    return check


def _python(value: object) -> str:
    if isinstance(value, float):  # `python: 3.10` in YAML is the float 3.1
        raise ValueError(f'must be a quoted string such as "3.10", got the number {value}')
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f'must be a quoted string such as "3.10", got {type(value).__name__}')
    return str(value)


def _commit(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"must be a string or null, got {type(value).__name__}")
    return value


def _timeout(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"must be a positive integer (seconds), got {value!r}")
    return value


def _date_time(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError(f'must be an RFC 3339 date-time such as "2024-12-02T00:00:00Z" (quoted), got {value!r}')
    try:
        _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not a valid date-time") from None
    return value


def _packages(value: object) -> tuple[str, ...]:
    names = _strings(value)
    try:
        validate_names(names, "")
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix(": ")) from None
    return names


def _mapping(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be a mapping")
    return dict(value)


@functools.cache
def spec_model() -> type[BaseModel]:
    """The pydantic model of one catalog entry (`specs:` item of config/catalog/*.yaml):
    unknown keys are errors, every field says what it is. Built on first use, like the store
    documents' models (`minisandbox.manifest`): commands that never read a catalog (a
    node's `minisandbox run`) never pay for building it."""
    from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

    Strings = Annotated[tuple[str, ...], BeforeValidator(_strings)]
    Text = Annotated[str, BeforeValidator(_string)]

    class CatalogSpec(BaseModel):
        """One environment spec of a catalog file (docs/design.md, "Environment specs";
        docs/catalog.md)."""

        model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

        name: Text
        """SWE-smith profile name, or `<owner>/<repo>@<version>` for SWE-bench."""
        kind: Annotated[Literal["swesmith", "swebench", "bundled"], BeforeValidator(_one_of(KINDS, ""))]
        """Where the spec's tasks come from: swesmith | swebench | bundled."""
        source: Text
        """Git URL or local path (relative to the workdir) of the repository."""
        commit: Annotated[str | None, BeforeValidator(_commit)] = None
        """The build commit; SWE-bench: null (each task's environment_setup_commit)."""
        python: Annotated[str, BeforeValidator(_python)]
        """The interpreter's minor version, quoted ("3.10")."""
        requirements: Strings = ()
        """Exact pins (the dependency input); may be empty."""
        requirements_files: Strings = ()
        """Repository-relative requirements files, used when no pins are known."""
        pre_install: Strings = ()
        """Shell commands run in /testbed before the dependencies are installed."""
        install: Strings = ("python -m pip install -e .",)
        """Shell commands that install the repository into the venv."""
        test_cmd: Text = DEFAULT_TEST_CMD
        """The test command (run verbatim in the sandbox, test files appended)."""
        log_parser: Annotated[
            Literal[tuple(LOG_PARSERS)], BeforeValidator(_one_of(LOG_PARSERS, " (log parsers: minisandbox.logformats)"))
        ] = "pytest"  # type: ignore[valid-type]
        """How the test output is read: a name in `minisandbox.logformats.LOG_PARSERS`."""
        timeout: Annotated[int, BeforeValidator(_timeout)] = 90
        """Seconds one test run may take."""
        python_full: str | None = None
        """The reference environment's exact interpreter (e.g. "3.10.15"); used when available."""
        exclude_newer: Annotated[str | None, BeforeValidator(_date_time)] = None
        """As-of date (RFC 3339): whatever is resolved rather than pinned is resolved as of it."""
        system_packages: Annotated[tuple[str, ...], BeforeValidator(_packages)] = ()
        """Debian packages the build or the tests need on the host (checked, never installed)."""
        warmup: Strings = ()
        """Extra commands run in /testbed after the install, with network (fetch test data)."""
        extra: Annotated[dict[str, Any], BeforeValidator(_mapping)] = {}
        """Free-form fields (never read by the build); a typo outside it is an error."""

        @model_validator(mode="after")
        def _full_version(self) -> CatalogSpec:
            full = self.python_full
            if full is not None and (not _FULL_VERSION.match(full) or not full.startswith(self.python + ".")):
                raise ValueError(
                    f"python_full must be a full version of python {self.python} such as "
                    f'"{self.python}.15", got {full!r}'
                )
            return self

    CatalogSpec.__qualname__ = "CatalogSpec"
    return CatalogSpec


def _spec_error(exc: ValidationError, who: str) -> str:
    """The one line for a spec that does not fit `spec_model()`: an unknown key first (with
    the closest known one), else the first bad field."""
    errors = exc.errors(include_url=False)
    known = set(spec_model().model_fields)
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        return (
            f"{who}: unknown key {_unknown_key(unknown[0]['loc'][0], known)}: fix it, or put free-form fields "
            f"under `extra:`"
        )
    err = errors[0]
    msg = err["msg"].removeprefix("Value error, ")
    if not err["loc"]:
        return f"{who}: {msg}"
    field_name = str(err["loc"][0])
    if err["type"] == "missing":
        return f"{who} lacks {field_name}; add it to the spec"
    if err["type"] != "value_error":
        msg = f"{msg} (got {err.get('input')!r})"
    return f"{who}: {field_name} {msg}"


class Catalog:
    """All specs by name, loaded from one or more YAML files."""

    def __init__(self, specs: Iterable[EnvSpec], origins: dict[str, str] | None = None):
        self.specs: dict[str, EnvSpec] = {}
        self.origins: dict[str, str] = {}
        for s in specs:
            origin = (origins or {}).get(s.name, "")
            if s.name in self.specs:
                raise CatalogError(f"duplicate environment spec {s.name!r} in catalog; rename or remove one")
            self.specs[s.name] = s
            self.origins[s.name] = origin

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> Catalog:
        """Read catalog files in order; any problem is a one-line CatalogError naming the
        file and the spec (CatalogMissing, also a FileNotFoundError, for a missing file)."""
        cat = cls([])
        for p in paths:
            path = Path(p)
            require_catalog_files([path])
            try:
                data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                line = f" at line {mark.line + 1}" if mark is not None else ""
                problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
                raise CatalogError(f"{path}: invalid YAML{line}: {problem}; fix the file") from None
            data = {} if data is None else data
            if not isinstance(data, dict):
                raise CatalogError(
                    f"{path}: a catalog is a mapping with one key, `specs:` (a list of specs); "
                    f"got a {type(data).__name__}"
                )
            stray = [k for k in data if k not in TOP_LEVEL]
            if stray:
                raise CatalogError(
                    f"{path}: unknown top-level key {_unknown_key(stray[0], TOP_LEVEL)}: a catalog "
                    f"is a mapping with one key, `specs:` (a list of specs)"
                )
            if not isinstance(data.get("specs", []), list):
                raise CatalogError(f"{path}: `specs:` must be a list of specs, got a {type(data['specs']).__name__}")
            for pos, entry in enumerate(data.get("specs") or [], 1):
                spec = EnvSpec.from_dict(entry, origin=f"{path} (spec #{pos})")
                if spec.name in cat.specs:
                    raise CatalogError(
                        f"{path}: duplicate environment spec {spec.name!r} (also in {cat.origins[spec.name]}); "
                        "rename or remove one"
                    )
                cat.specs[spec.name] = spec
                cat.origins[spec.name] = str(path)
        return cat

    def __len__(self) -> int:
        return len(self.specs)

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    def __getitem__(self, name: str) -> EnvSpec:
        return self.specs[name]

    def __iter__(self) -> Iterator[EnvSpec]:
        return iter(self.specs.values())


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def default_catalog_paths() -> list[str]:
    """The catalogs `config/config.yaml` names, found in the working dir or the checkout
    (what `minisandbox eval` and `minisandbox.task` use when no catalog is given)."""
    for base in (Path.cwd(), project_root()):
        cfg = base / "config" / "config.yaml"
        if cfg.exists():
            names = (yaml.safe_load(cfg.read_text()) or {}).get("catalog") or []
            names = [names] if isinstance(names, str) else names
            found = [str(base / n) for n in names if (base / n).exists()]
            if found:
                return found
    return []
