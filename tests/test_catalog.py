"""Environment-spec catalog: the generator, the committed catalogs, loading and lookup.

Tests marked by `needs_shared` read ../shared/data (the generator's inputs) and are skipped
where it is absent; everything else runs on the committed YAML or on files made here.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from minisandbox.catalog import Catalog, CatalogError, EnvSpec, spec_for, spec_name_for, task_commit
from minisandbox.records import normalize

ROOT = Path(__file__).resolve().parents[1]
CATALOG_DIR = ROOT / "config" / "catalog"
SWESMITH_YAML = CATALOG_DIR / "swesmith.yaml"
SWEBENCH_YAML = CATALOG_DIR / "swebench.yaml"
SHARED = ROOT.parent / "shared" / "data"

needs_shared = pytest.mark.skipif(
    not (SHARED / "swesmith_python_profiles.json").is_file(), reason=f"generator inputs not at {SHARED}"
)


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_catalog", ROOT / "scripts" / "gen_catalog.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_catalog"] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture(scope="module")
def smith() -> Catalog:
    return Catalog.load([SWESMITH_YAML])


@pytest.fixture(scope="module")
def bench() -> Catalog:
    return Catalog.load([SWEBENCH_YAML])


def export_conda(name: str) -> dict[str, str]:
    """The conda section of a profile's export, name -> version."""
    data = yaml.safe_load((SHARED / "swesmith-envs" / name / f"sweenv_{name}.yml").read_text())
    return {d.split("=")[0]: d.split("=")[1] for d in data["dependencies"] if isinstance(d, str)}


def export_pins(name: str) -> list[str]:
    """The pip section of a profile's conda export, read independently of the generator."""
    data = yaml.safe_load((SHARED / "swesmith-envs" / name / f"sweenv_{name}.yml").read_text())
    return next(d["pip"] for d in data["dependencies"] if isinstance(d, dict))


# -- the generator -------------------------------------------------------------------


@needs_shared
def test_generator_is_deterministic_and_the_committed_catalog_is_current(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert gen.main(["--shared", str(SHARED), "--out", str(a)]) == 0
    assert gen.main(["--shared", str(SHARED), "--out", str(b)]) == 0
    for name in ("swesmith.yaml", "swebench.yaml"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
        assert (a / name).read_bytes() == (CATALOG_DIR / name).read_bytes(), (
            f"config/catalog/{name} is stale: run .venv/bin/python scripts/gen_catalog.py"
        )
    assert gen.main(["--shared", str(SHARED), "--out", str(CATALOG_DIR), "--check"]) == 0


@needs_shared
def test_check_mode_detects_a_stale_catalog(tmp_path: Path) -> None:
    assert gen.main(["--shared", str(SHARED), "--out", str(tmp_path)]) == 0
    (tmp_path / "swebench.yaml").write_text((tmp_path / "swebench.yaml").read_text() + "# edited\n")
    assert gen.main(["--shared", str(SHARED), "--out", str(tmp_path), "--check"]) == 1


def test_header_records_the_inputs() -> None:
    head = SWESMITH_YAML.read_text().split("\nspecs:", 1)[0]
    assert re.search(r"swesmith_python_profiles\.json: sha256:[0-9a-f]{64}", head)
    assert re.search(r"swesmith-envs/: \d+ files, sha256:[0-9a-f]{64}", head)
    assert ".venv/bin/python scripts/gen_catalog.py" in head  # Debian has no bare `python`
    assert re.search(r"swebench_python_specs\.json: sha256:[0-9a-f]{64}", SWEBENCH_YAML.read_text())


def _fake_shared(root: Path) -> Path:
    """A small shared-data directory with the awkward cases the real data lacks."""
    profile = {
        "name": "own__pkg.0123abcd",
        "owner": "own",
        "repo": "python-Pkg_Name",
        "commit": "0123abcd" + "0" * 32,
        "python_version": "3.10",
        "install_cmds": ["python -m pip install -e ."],
        "test_cmd": "source /opt/miniconda3/bin/activate; conda activate testbed; python -m unittest -v",
        "mirror_name": "swesmith/own__pkg.0123abcd",
        "image_name": "img",
        "timeout": 60,
        "overridden_methods": ["log_parser"],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "swesmith_python_profiles.json").write_text(json.dumps({"python_profiles": [profile]}))
    env = root / "swesmith-envs" / profile["name"]
    env.mkdir(parents=True)
    (env / f"sweenv_{profile['name']}.yml").write_text(
        textwrap.dedent("""\
        name: testbed
        dependencies:
          - python=3.12.9=h5148396_0
          - pip=25.0=py312h06a4308_0
          - fasttext=0.9.2=py312_0
          - pip:
              - -e git+https://github.com/own/pkg.git@0123abcd#egg=pkg-name
              - other @ file:///testbed/vendor/other
              - git+https://github.com/x/y.git
              - Zeta==1.0
              - pkg-name==0.1.dev0
              - alpha[extra]==2.0
              - loose>=1.0
        prefix: /opt/miniconda3/envs/testbed
        """)
    )
    (env / "setup_env.sh").write_text(
        textwrap.dedent("""\
        #!/bin/bash
        cat <<'EOF_59812759871' > swesmith_environment.yml
        name: testbed
        EOF_59812759871
        conda env create --file swesmith_environment.yml
        conda activate testbed
        echo "Current environment: $CONDA_DEFAULT_ENV"
        apt-get update && apt-get install -y graphviz libxml2-dev
        python -m pip install -e .
        """)
    )
    specs = {
        "django/django": {
            "3.0": {
                "python": "3.6",
                "packages": "requirements.txt",
                "install": "python -m pip install -e .",
                "pre_install": ["apt-get update && apt-get install -y locales", "sed -i s/a/b/ setup.py"],
                "eval_commands": ["export LANG=en_US.UTF-8", "locale-gen"],
                "test_cmd": "./tests/runtests.py --verbosity 2",
            },
            "1.10": {
                "python": "3.5",
                "packages": "requirements.txt",
                "install": "python setup.py install",
                "test_cmd": "./tests/runtests.py --verbosity 2",
            },
        },
        "scikit-learn/scikit-learn": {
            "0.20": {
                "python": "3.6",
                "packages": "'numpy=1.19' scipy cython pytest",
                "pip_packages": ["cython==0.29", "numpy"],
                "install": "pip install -e .",
                "test_cmd": "pytest -rA",
            },
        },
        "pydata/xarray": {
            "0.12": {
                "python": "3.10",
                "packages": "environment.yml",
                "install": "pip install -e .",
                "no_use_env": True,
                "test_cmd": "pytest -rA",
            }
        },
        "dbt-labs/dbt-core": {"1.0": {"python": "3.9", "packages": "requirements.txt", "install": "pip install -e ."}},
        "swe-bench/humaneval": {"1.0": {"python": "3.9", "test_cmd": "python"}},
    }
    (root / "swebench_python_specs.json").write_text(json.dumps(specs))
    return root


def test_generator_filters_pins_and_moves_system_steps(tmp_path: Path) -> None:
    shared = _fake_shared(tmp_path / "shared")
    out = tmp_path / "out"
    assert gen.main(["--shared", str(shared), "--out", str(out)]) == 0
    cat = Catalog.load([out / "swesmith.yaml"])
    spec = cat["own__pkg.0123abcd"]
    # only exact pins of other packages: no editable/VCS/file lines, not the project itself;
    # plus the conda packages that are the same project on PyPI (pip, fasttext; not python)
    assert spec.requirements == ("alpha[extra]==2.0", "fasttext==0.9.2", "pip==25.0", "Zeta==1.0")
    assert spec.extra["conda_pins"] == ["fasttext==0.9.2", "pip==25.0"]
    # dated by pip 25.0 (uploaded 2025-01-26, config/catalog/pypi-release-dates.json); 3.12 export
    assert spec.exclude_newer == "2025-01-27T00:00:00Z" and spec.python_full is None
    dropped = "\n".join(spec.extra["dropped_pins"])
    for line in ("-e git+", "other @ file://", "git+https://github.com/x/y.git", "pkg-name==0.1.dev0", "loose>=1.0"):
        assert line in dropped
    assert spec.install == ("python -m pip install -e .",)  # apt-get moved out of the venv build
    assert spec.system_packages == ("graphviz", "libxml2-dev")
    assert spec.python == "3.10" and spec.extra["python_conda"] == "3.12.9" and "python_note" in spec.extra
    assert spec.extra["conda_packages"] == ["fasttext==0.9.2"]
    assert spec.extra["profile_install_cmds"] == ["python -m pip install -e ."]
    assert (spec.source, spec.commit, spec.timeout) == (
        "https://github.com/own/python-Pkg_Name.git",
        "0123abcd" + "0" * 32,
        60,
    )
    assert spec.log_parser == "unittest"  # the test command does not run pytest

    bench = Catalog.load([out / "swebench.yaml"])
    assert sorted(bench.specs) == [
        "django/django@1.10",
        "django/django@3.0",
        "pydata/xarray@0.12",
        "scikit-learn/scikit-learn@0.20",
    ]
    header = (out / "swebench.yaml").read_text().split("\nspecs:", 1)[0]
    assert "dbt-labs/dbt-core@1.0: no test_cmd" in header and "swe-bench/humaneval@1.0: not a git" in header
    dj = bench["django/django@3.0"]
    assert dj.requirements_files == ("tests/requirements/py3.txt",) and dj.requirements == ()
    assert dj.pre_install == ("sed -i s/a/b/ setup.py",)
    assert dj.test_cmd == (
        "source /opt/miniconda3/bin/activate; conda activate testbed; export LANG=en_US.UTF-8; "
        "./tests/runtests.py --verbosity 2"
    )
    assert dj.extra["system_commands"] == ["apt-get update && apt-get install -y locales", "locale-gen"]
    assert dj.system_packages == ("locales",)
    assert (dj.commit, dj.log_parser, dj.timeout) == (None, "django", 1800)
    assert bench["django/django@1.10"].extra["eval_install"] == "python setup.py install"
    sk = bench["scikit-learn/scikit-learn@0.20"]
    # conda `numpy=1.19` is 1.19.*; a versioned pip entry replaces the conda one, a bare one does not
    assert sk.requirements == ("numpy==1.19.*", "scipy", "cython==0.29", "pytest")
    xr = bench["pydata/xarray@0.12"]
    assert xr.requirements_files == ("ci/requirements/environment.yml",)
    assert xr.extra["requirements_files_alternatives"] == ["environment.yml"] and xr.extra["no_use_env"] is True


def test_generator_reports_a_missing_export_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = _fake_shared(tmp_path / "shared")
    (shared / "swesmith-envs" / "own__pkg.0123abcd" / "sweenv_own__pkg.0123abcd.yml").unlink()
    assert gen.main(["--shared", str(shared), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sweenv_own__pkg.0123abcd.yml does not exist" in err
    assert not (tmp_path / "out").exists()  # nothing half-written
    assert gen.main(["--shared", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    assert "pass --shared" in capsys.readouterr().err


# -- the SWE-bench as-of date ------------------------------------------------------------


def _files(*stamps: str, yanked: bool = False) -> list[dict[str, Any]]:
    """Files of one release in PyPI's JSON API (`releases`)."""
    return [{"upload_time_iso_8601": s, "yanked": yanked} for s in stamps]


RELEASES = {
    "2.9.0": _files("2019-01-01T10:00:00.123456Z"),
    "3.0.0": _files("2023-09-30T12:00:00.000001Z"),
    "3.0.1": _files("2024-01-18T09:00:00.5Z", "2024-01-17T08:00:00.25Z"),  # the first upload dates it
    "3.0.2": _files("2024-12-01T00:00:00Z", yanked=True),  # yanked: not a release of the series
    "3.0.3rc1": _files("2025-01-01T00:00:00Z"),  # pre-release
    "3.0.4.dev0": _files("2025-01-02T00:00:00Z"),  # dev release
    "3.0.5": [],  # no files
    "3.1.0": _files("2024-11-13T00:00:00Z"),
    "2022.9.0": _files("2022-09-29T00:00:00Z"),
    "not a version": _files("2020-01-01T00:00:00Z"),
}


def test_the_newest_final_release_of_a_series_and_the_first_of_a_later_one() -> None:
    assert gen.newest_in_series(RELEASES, (3, 0)) == ("3.0.1", "2024-01-17T08:00:00Z")
    assert gen.newest_in_series(RELEASES, (2, 9)) == ("2.9.0", "2019-01-01T10:00:00Z")
    assert gen.newest_in_series(RELEASES, (2022, 9)) == ("2022.9.0", "2022-09-29T00:00:00Z")
    assert gen.newest_in_series(RELEASES, (3, 2)) is None
    # the earliest upload of a later series, not the lowest version: 2022.9.0 came first
    assert gen.first_after_series(RELEASES, (3, 0)) == ("2022.9.0", "2022-09-29T00:00:00Z")
    assert gen.first_after_series({k: v for k, v in RELEASES.items() if k != "2022.9.0"}, (3, 0)) == (
        "3.1.0",
        "2024-11-13T00:00:00Z",
    )
    assert gen.first_after_series(RELEASES, (2022, 9)) is None
    assert [gen.series_of(v) for v in ("3.0", "2022.09", "v5.3", "1", "1.2.3", "dev")] == [
        (3, 0),
        (2022, 9),
        (5, 3),
        None,
        None,
        None,
    ]


def _entry(uploaded: str | None, next_uploaded: str | None = None, retrieved: str = "2026-12-02") -> dict[str, Any]:
    return {
        "project": "flask",
        "release": "3.0.9" if uploaded else None,
        "uploaded": uploaded,
        "next_release": "3.1.0" if next_uploaded else None,
        "next_uploaded": next_uploaded,
        "retrieved": retrieved,
    }


def test_the_as_of_date_rule() -> None:
    assert gen.SWEBENCH_FLOOR.isoformat() == "2024-06-27" and gen.SERIES_MARGIN_DAYS == 7
    flask = "pallets/flask"

    def as_of(entry: dict[str, Any] | None, python: str = "3.11", repo: str = flask) -> tuple[str, str, Any]:
        return gen.swebench_as_of(repo, "3.0", python, entry)

    # a series that ended before the floor: the floor (the official images resolved then)
    date, why, fallback = as_of(_entry("2024-04-07T16:00:00Z"))
    assert (date, fallback) == ("2024-06-28T00:00:00Z", None)
    assert why.startswith("the floor 2024-06-27") and "flask 3.0.9" in why and "uploaded 2024-04-07" in why
    # a later series: its newest release + 7 days, to the end of that day
    date, why, _ = as_of(_entry("2024-07-30T23:59:00Z"))
    assert date == "2024-08-07T00:00:00Z" and why.startswith("flask 3.0.9, the newest final 3.0 release")
    # a later series that came first ends the series (backports do not move the date)
    date, why, _ = as_of(_entry("2026-03-20T00:00:00Z", next_uploaded="2024-09-08T00:00:00Z"))
    assert date == "2024-09-16T00:00:00Z" and "flask 3.1.0, the first release after the 3.0 series" in why
    assert "came 2026-03-20" in why
    # a later series that came after the newest release changes nothing
    assert as_of(_entry("2024-07-30T00:00:00Z", next_uploaded="2024-08-30T00:00:00Z"))[0] == "2024-08-07T00:00:00Z"
    # never past the day before the lookup
    date, why, _ = as_of(_entry("2026-11-30T00:00:00Z", retrieved="2026-12-02"))
    assert date == "2026-12-02T00:00:00Z" and "capped at the day before its lookup (2026-12-02)" in why
    # the Python guard: 3.14 (2025-10-07) + 182 days is later than the floor and the release
    date, why, _ = as_of(_entry("2024-07-30T00:00:00Z"), python="3.14")
    assert date == "2026-04-08T00:00:00Z" and why.startswith("Python 3.14 (released 2025-10-07) + 182 days")
    assert "flask 3.0.9" in why
    # fallbacks: the floor, and the reason
    for entry, repo, reason in (
        (_entry(None), flask, "no final 3.0 release of flask on PyPI"),
        (None, flask, "pallets/flask@3.0 not in pypi-release-dates.json (run with --refresh-dates)"),
        (_entry("2024-07-30T00:00:00Z"), "own/unknown", "no PyPI project known for own/unknown"),
    ):
        date, why, fallback = as_of(entry, repo=repo)
        assert date == "2024-06-28T00:00:00Z" and fallback is not None and fallback.startswith(reason), fallback
        assert why.startswith("the floor") and reason in why
    with pytest.raises(gen.InputError, match=r"own/unknown@3.0: Python 2.7 is not in PYTHON_RELEASES"):
        as_of(None, python="2.7", repo="own/unknown")


def test_generator_dates_every_swebench_spec_from_the_dates_file(tmp_path: Path) -> None:
    shared = _fake_shared(tmp_path / "shared")
    doc = json.loads((CATALOG_DIR / "pypi-release-dates.json").read_text())
    doc["swebench_series"] = {
        "django/django@3.0": {**_entry("2025-01-10T00:00:00Z"), "project": "django"},
        "django/django@1.10": {**_entry("2017-09-05T00:00:00Z"), "project": "django"},
        "pydata/xarray@0.12": {**_entry(None), "project": "xarray"},
    }  # scikit-learn@0.20 was not looked up
    dates = tmp_path / "dates.json"
    dates.write_text(json.dumps(doc))
    outs = []
    for run in ("a", "b"):
        assert gen.main(["--shared", str(shared), "--out", str(tmp_path / run), "--dates", str(dates)]) == 0
        outs.append((tmp_path / run / "swebench.yaml").read_bytes())
    assert outs[0] == outs[1]  # deterministic
    bench = Catalog.load([tmp_path / "a" / "swebench.yaml"])
    assert {s.name: s.exclude_newer for s in bench} == {
        "django/django@3.0": "2025-01-18T00:00:00Z",
        "django/django@1.10": "2024-06-28T00:00:00Z",
        "pydata/xarray@0.12": "2024-06-28T00:00:00Z",
        "scikit-learn/scikit-learn@0.20": "2024-06-28T00:00:00Z",
    }
    assert bench["django/django@3.0"].extra["exclude_newer_source"].startswith("django 3.0.9, the newest final")
    header = outs[0].decode().split("\nspecs:", 1)[0]
    assert "Dated by the floor for want of a release date:\n#   pydata/xarray@0.12: no final 0.12" in header
    assert "#   scikit-learn/scikit-learn@0.20: scikit-learn/scikit-learn@0.20 not in" in header
    assert "django/django@" not in header.split("Dated by the floor", 1)[1].split("Skipped:", 1)[0]
    digest = gen.series_digest(doc["swebench_series"])
    assert f"#   pypi-release-dates.json swebench_series: 3 series, sha256:{digest}" in header
    # the table is part of the output: another date, other bytes
    doc["swebench_series"]["django/django@3.0"]["uploaded"] = "2025-02-10T00:00:00Z"
    dates.write_text(json.dumps(doc))
    assert gen.main(["--shared", str(shared), "--out", str(tmp_path / "a"), "--dates", str(dates), "--check"]) == 1


def test_refresh_looks_up_only_missing_series_once_per_project(tmp_path: Path) -> None:
    shared = _fake_shared(tmp_path / "shared")
    kept = {**_entry("2021-04-06T00:00:00Z"), "project": "django"}
    calls: list[str] = []

    def fetch(project: str) -> dict[str, list[dict[str, Any]]]:
        calls.append(project)
        return {"0.20.4": _files("2019-07-30T00:00:00Z"), "0.21.0": _files("2019-05-10T00:00:00Z")}

    out = gen.refresh_swebench_series(shared, {"django/django@3.0": kept}, gen._dt.date(2026, 12, 2), fetch)
    # django@1.10 and scikit-learn@0.20 and xarray@0.12 were missing; dbt-core (no test_cmd)
    # and humaneval (not git) are skipped specs and never looked up
    assert sorted(calls) == ["django", "scikit-learn", "xarray"]
    assert out["django/django@3.0"] == kept
    assert out["scikit-learn/scikit-learn@0.20"] == {
        "project": "scikit-learn",
        "release": "0.20.4",
        "uploaded": "2019-07-30T00:00:00Z",
        "next_release": "0.21.0",
        "next_uploaded": "2019-05-10T00:00:00Z",
        "retrieved": "2026-12-02",
    }
    assert out["pydata/xarray@0.12"]["release"] is None and out["pydata/xarray@0.12"]["retrieved"] == "2026-12-02"
    assert list(out) == sorted(out, key=str.lower)


# -- the committed SWE-smith catalog --------------------------------------------------


def test_swesmith_catalog_has_133_profiles(smith: Catalog) -> None:
    assert len(smith) == 133
    specs = list(smith)
    assert all(s.kind == "swesmith" and re.fullmatch(r"[0-9a-f]{40}", str(s.commit)) for s in specs)
    assert all(s.name.endswith("." + str(s.commit)[:8]) for s in specs)
    assert all(s.source.startswith("https://github.com/") and s.source.endswith(".git") for s in specs)
    assert all(s.log_parser in ("pytest", "unittest") and s.timeout == 90 for s in specs)
    assert sum(1 for s in specs if s.requirements) == 133
    assert all(s.extra["python_conda"].count(".") == 2 for s in specs)
    assert {s.name for s in specs if s.log_parser == "unittest"} == {
        "tornadoweb__tornado.d5ac65c1",
        "un33k__python-slugify.872b3750",
    }
    assert not any("apt-get" in c for s in specs for c in s.install)


@needs_shared
def test_swesmith_catalog_covers_every_profile(smith: Catalog) -> None:
    profiles = json.loads((SHARED / "swesmith_python_profiles.json").read_text())["python_profiles"]
    assert {p["name"] for p in profiles} == set(smith.specs)
    for p in profiles:
        spec = smith[p["name"]]
        assert (spec.commit, spec.python, spec.timeout) == (p["commit"], p["python_version"], p["timeout"])
        assert spec.test_cmd == p["test_cmd"]


@needs_shared
@pytest.mark.parametrize("name", ["arrow-py__arrow.1d70d009", "pallets__flask.bc098406"])
def test_exact_pins_match_the_official_export(smith: Catalog, name: str) -> None:
    pins = export_pins(name)
    assert all("==" in p for p in pins)
    # the pip section exactly, plus the conda section's packages that are on PyPI (docs/catalog.md)
    conda = export_conda(name)
    from_conda = sorted(f"{n}=={conda[n]}" for n in ("pip", "setuptools", "wheel"))
    assert smith[name].extra["conda_pins"] == from_conda
    assert sorted(smith[name].requirements, key=str.lower) == sorted(pins + from_conda, key=str.lower)
    assert "pytest==8.3.3" in smith["arrow-py__arrow.1d70d009"].requirements


@needs_shared
@pytest.mark.parametrize(
    "name,own",
    [
        ("cool-RR__PySnooper.57472b46", "pysnooper"),
        ("facebookresearch__hydra.0f03eb60", "hydra-core"),
        ("pyutils__line_profiler.a646bf0f", "line-profiler"),
    ],
)
def test_the_profiles_own_package_is_not_pinned(smith: Catalog, name: str, own: str) -> None:
    pins = export_pins(name)
    assert any(p.lower().startswith(own + "==") for p in pins)  # the export does list it ...
    reqs = smith[name].requirements
    assert not any(r.lower().startswith(own + "==") for r in reqs)  # ... the spec does not
    conda_pins = set(smith[name].extra.get("conda_pins", []))
    assert set(reqs) == {p for p in pins if not p.lower().startswith(own + "==")} | conda_pins


def test_no_spec_pins_its_own_project(smith: Catalog) -> None:
    for s in smith:
        repo = s.source.rstrip("/").rsplit("/", 1)[1].removesuffix(".git")
        own = {gen.canon(repo), gen.canon(repo.removeprefix("python-"))}
        assert not [r for r in s.requirements if gen.canon(r.split("==")[0].split("[")[0]) in own], s.name


def test_python_mismatch_profiles_keep_the_profile_interpreter(smith: Catalog) -> None:
    moto = smith["getmoto__moto.694ce1f4"]
    assert moto.python == "3.10" and moto.extra["python_conda"] == "3.12.9"
    monai = smith["Project-MONAI__MONAI.a09c1f08"]
    assert not any(r.startswith(("numcodecs==", "zarr==")) for r in monai.requirements)
    assert any("numcodecs" in d for d in monai.extra["dropped_pins"])


# -- the committed SWE-bench catalog --------------------------------------------------


@needs_shared
def test_swebench_catalog_count_matches_the_specs(bench: Catalog) -> None:
    data = json.loads((SHARED / "swebench_python_specs.json").read_text())
    expected = {
        f"{repo}@{v}"
        for repo, vs in data.items()
        for v, s in vs.items()
        if s.get("test_cmd") and repo != "swe-bench/humaneval"
    }
    assert set(bench.specs) == expected


def test_swebench_catalog_spot_check(bench: Catalog) -> None:
    assert len(bench) == 282
    assert all(s.kind == "swebench" and s.commit is None and s.timeout == 1800 for s in bench)
    dj = bench["django/django@3.0"]
    assert dj.python == "3.6"
    assert dj.source == "https://github.com/django/django.git"
    assert dj.requirements_files == ("tests/requirements/py3.txt",)
    assert dj.install == ("python -m pip install -e .",)
    assert dj.log_parser == "django"
    assert dj.test_cmd.startswith(
        "source /opt/miniconda3/bin/activate; conda activate testbed; export LANG=en_US.UTF-8;"
    )
    assert dj.test_cmd.endswith("; ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1")
    astropy = bench["astropy/astropy@5.0"]
    assert astropy.log_parser == "pytest_v2"
    assert astropy.requirements[:2] == ("attrs==23.1.0", "exceptiongroup==1.1.3")
    assert astropy.pre_install[0].startswith("sed -i") and astropy.install == (
        "python -m pip install -e .[test] --verbose",
    )
    sympy = bench["sympy/sympy@1.7"]
    assert sympy.log_parser == "sympy" and sympy.requirements[:2] == ("mpmath==1.3.0", "flake8")
    assert bench["psf/requests@2.0"].log_parser == "pytest_options"
    assert bench["mwaskom/seaborn@0.12"].log_parser == "seaborn"
    assert bench["sphinx-doc/sphinx@7.1"].test_cmd.endswith("tox --current-env -epy39 -v --")


def test_every_swebench_spec_has_an_as_of_date(bench: Catalog) -> None:
    """The series measured with drift (docs/fidelity.md): flask 3.0 and astroid 2.15 ended
    before the floor, sphinx 8.0 and pytest 8.3 after it."""
    for spec in bench:
        assert spec.exclude_newer and spec.exclude_newer >= "2024-06-28T00:00:00Z", spec.name
        assert spec.extra["exclude_newer_source"], spec.name
    assert bench["pallets/flask@3.0"].exclude_newer == "2024-06-28T00:00:00Z"
    assert bench["pylint-dev/astroid@2.15"].exclude_newer == "2024-06-28T00:00:00Z"
    assert bench["sphinx-doc/sphinx@8.0"].exclude_newer == "2024-08-07T00:00:00Z"  # 8.0.2: 2024-07-30
    assert bench["pytest-dev/pytest@8.3"].exclude_newer == "2025-03-10T00:00:00Z"  # 8.3.5: 2025-03-02
    # a long-term series ends at the next series' first release: Django 6.0, 2025-12-03
    assert bench["django/django@5.2"].exclude_newer == "2025-12-11T00:00:00Z"


def test_log_parsers_are_known_to_minisandbox(smith: Catalog, bench: Catalog) -> None:
    logparsers = pytest.importorskip("minisandbox.grading.logparsers")
    used = {s.log_parser for s in list(smith) + list(bench)}
    assert used <= set(logparsers.PARSERS), used - set(logparsers.PARSERS)
    assert gen.SWEBENCH_PARSERS == logparsers.SWEBENCH_REPO_PARSERS


# -- Catalog.load errors --------------------------------------------------------------

GOOD = """\
specs:
  - name: a__b.12345678
    kind: swesmith
    source: https://github.com/a/b.git
    commit: 1234567890abcdef1234567890abcdef12345678
    python: "3.10"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def one_line_error(exc: pytest.ExceptionInfo[BaseException]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    return msg


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as exc:
        Catalog.load([tmp_path / "nope.yaml"])
    assert str(tmp_path / "nope.yaml") in one_line_error(exc)


def test_load_duplicate_name_names_both_files(tmp_path: Path) -> None:
    a, b = write(tmp_path, "a.yaml", GOOD), write(tmp_path, "b.yaml", GOOD)
    with pytest.raises(CatalogError) as exc:
        Catalog.load([a, b])
    msg = one_line_error(exc)
    assert str(a) in msg and str(b) in msg and "a__b.12345678" in msg
    with pytest.raises(CatalogError, match="duplicate"):
        Catalog.load([write(tmp_path, "c.yaml", GOOD + GOOD.split("specs:\n", 1)[1])])


@pytest.mark.parametrize(
    "field_name,replacement,expect",
    [
        ("python", "", "lacks python"),
        ("kind", "", "lacks kind"),
        ("source", "", "lacks source"),
        ("python", "    python: 3.10\n", "quoted string"),
        ("kind", "    kind: docker\n", "kind 'docker'"),
        ("commit", "    commit: 12345\n", "commit must be a string"),
        (
            "commit",
            "    commit: 1234567890abcdef1234567890abcdef12345678\n    timeout: -1\n",
            "timeout must be a positive",
        ),
        (
            "commit",
            "    commit: 1234567890abcdef1234567890abcdef12345678\n    install: pip install .\n",
            "install must be a list",
        ),
    ],
)
def test_load_bad_field_names_file_and_spec(tmp_path: Path, field_name: str, replacement: str, expect: str) -> None:
    lines = GOOD.splitlines(keepends=True)
    text = "".join(replacement if line.strip().startswith(field_name + ":") else line for line in lines)
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(CatalogError) as exc:
        Catalog.load([path])
    msg = one_line_error(exc)
    assert str(path) in msg and "a__b.12345678" in msg and expect in msg


def test_load_missing_name_and_bad_structure(tmp_path: Path) -> None:
    path = write(tmp_path, "noname.yaml", GOOD.replace("  - name: a__b.12345678\n    kind", "  - kind"))
    with pytest.raises(CatalogError) as exc:
        Catalog.load([path])
    assert str(path) in one_line_error(exc) and "spec #1" in str(exc.value) and "lacks name" in str(exc.value)
    for text, expect in [
        ("specs: 5\n", "`specs:` must be a list of specs, got a int"),
        ("- a\n- b\n", "a catalog is a mapping with one key, `specs:`"),
        ("specs:\n  - just a string\n", "must be a mapping"),
        ("specs:\n  - name: [unclosed\n", "invalid YAML at line"),
    ]:
        with pytest.raises(CatalogError, match=re.escape(expect)) as exc:
            Catalog.load([write(tmp_path, "x.yaml", text)])
        assert str(tmp_path / "x.yaml") in one_line_error(exc)


def test_empty_file_is_an_empty_catalog_and_extra_round_trips(tmp_path: Path) -> None:
    assert len(Catalog.load([write(tmp_path, "empty.yaml", "")])) == 0
    text = GOOD + "    extra:\n      python_conda: 3.10.15\n      note: free-form\n"
    spec = Catalog.load([write(tmp_path, "x.yaml", text)])["a__b.12345678"]
    assert spec.extra == {"python_conda": "3.10.15", "note": "free-form"}
    assert EnvSpec.from_dict(spec.to_dict()) == spec
    assert EnvSpec.from_dict(spec.to_dict()).extra == spec.extra


def test_an_unknown_spec_key_is_an_error_naming_file_spec_key_and_the_closest(tmp_path: Path) -> None:
    """A typo is not taken as a free-form field: the spec would build with the default test
    command and every task would look broken instead."""
    path = write(tmp_path, "typo.yaml", GOOD + "    test_comand: pytest -x\n")
    with pytest.raises(CatalogError) as exc:
        Catalog.load([path])
    assert one_line_error(exc) == (
        f"{path} (spec #1): spec 'a__b.12345678': unknown key 'test_comand' (did you mean "
        f"'test_cmd'?): fix it, or put free-form fields under `extra:`"
    )
    with pytest.raises(CatalogError, match=r"unknown key 'zzz': fix it"):  # nothing close: no suggestion
        Catalog.load([write(tmp_path, "far.yaml", GOOD + "    zzz: 1\n")])


def test_a_misspelled_top_level_key_blames_the_catalog(tmp_path: Path) -> None:
    path = write(tmp_path, "top.yaml", GOOD.replace("specs:", "spec:"))
    with pytest.raises(CatalogError) as exc:
        Catalog.load([path])
    assert one_line_error(exc) == (
        f"{path}: unknown top-level key 'spec' (did you mean 'specs'?): a catalog is a "
        f"mapping with one key, `specs:` (a list of specs)"
    )


def test_all_default_catalogs_load_together() -> None:
    files = sorted(CATALOG_DIR.glob("*.yaml"))
    cat = Catalog.load(files)
    assert len(cat) >= 133 + 282
    assert cat.origins["arrow-py__arrow.1d70d009"] == str(SWESMITH_YAML)


# -- tasks -> specs --------------------------------------------------------------------

PATCH = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n"


def test_spec_for_swesmith_task(smith: Catalog) -> None:
    rec = normalize(
        {
            "instance_id": "arrow-py__arrow.1d70d009.combine_file__abc12345",
            "repo": "swesmith/arrow-py__arrow.1d70d009",
            "patch": PATCH,
            "FAIL_TO_PASS": ["tests/test_arrow.py::test_a"],
            "PASS_TO_PASS": [],
        }
    )
    assert spec_name_for(rec) == "arrow-py__arrow.1d70d009"
    spec = spec_for(smith, rec)
    assert spec is smith["arrow-py__arrow.1d70d009"]
    assert task_commit(spec, rec) == spec.commit == "1d70d0091980ea489a64fa95a48e99b45f29f0e7"


def test_spec_for_swebench_task_takes_the_setup_commit(bench: Catalog) -> None:
    rec = normalize(
        {
            "instance_id": "django__django-11099",
            "repo": "django/django",
            "version": "3.0",
            "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
            "environment_setup_commit": "419a78300f7cd27611196e1e464d50fd0385ff27",
            "patch": PATCH,
            "test_patch": PATCH,
            "FAIL_TO_PASS": '["test_a (x.T)"]',
            "PASS_TO_PASS": "[]",
        }
    )
    assert spec_name_for(rec) == "django/django@3.0"
    spec = spec_for(bench, rec)
    assert spec.commit == "419a78300f7cd27611196e1e464d50fd0385ff27"
    assert task_commit(spec, rec) == "d26b2424437dabeeca94d7900b37d2df4410da0c"
    assert bench["django/django@3.0"].commit is None  # the catalog entry is not mutated
    assert spec.with_commit("x") != spec and spec.requirements_files == bench["django/django@3.0"].requirements_files


def test_spec_for_unknown_spec_names_the_task(smith: Catalog, bench: Catalog) -> None:
    rec = normalize(
        {
            "instance_id": "django__django-1",
            "repo": "django/django",
            "version": "9.9",
            "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
            "patch": PATCH,
            "test_patch": "",
            "FAIL_TO_PASS": "[]",
            "PASS_TO_PASS": "[]",
        }
    )
    with pytest.raises(KeyError, match=r"django/django@9\.9.*django__django-1"):
        spec_for(bench, rec)
    with pytest.raises(KeyError, match="no environment spec"):
        spec_for(smith, rec)


# -- fidelity fields: as-of date, exact interpreter, system packages, warm-up ----------------


def test_fidelity_fields_are_validated_in_one_line() -> None:
    base = {"name": "n", "kind": "bundled", "source": "s", "commit": "c", "python": "3.10"}
    spec = EnvSpec.from_dict(
        {
            **base,
            "python_full": "3.10.15",
            "exclude_newer": "2024-12-02T00:00:00Z",
            "system_packages": ["graphviz"],
            "warmup": ["python -c 'import nltk'"],
        }
    )
    assert (spec.python_full, spec.exclude_newer, spec.system_packages, spec.warmup) == (
        "3.10.15",
        "2024-12-02T00:00:00Z",
        ("graphviz",),
        ("python -c 'import nltk'",),
    )
    assert spec.to_dict()["system_packages"] == ["graphviz"] and not spec.extra
    for field_name, value, msg in (
        ("python_full", "3.11.2", "full version of python 3.10"),
        ("exclude_newer", "2024-12-02", "RFC 3339"),
        ("exclude_newer", "2024-13-02T00:00:00Z", "not a valid date-time"),
        ("system_packages", ["Bad Name"], "not a Debian package name"),
        ("warmup", "pytest", "list of strings"),
    ):
        with pytest.raises(CatalogError, match=msg) as exc:
            EnvSpec.from_dict({**base, field_name: value}, origin="cat.yaml (spec #1)")
        assert "\n" not in str(exc.value) and "cat.yaml" in str(exc.value)


def test_warmup_collects_pytest_suites_and_adds_the_specs_commands() -> None:
    base = {"name": "n", "kind": "bundled", "source": "s", "commit": "c", "python": "3.10"}
    spec = EnvSpec.from_dict({**base, "warmup": ["python -m nltk.downloader punkt"]})
    assert spec.warmup_commands() == [f"{spec.test_cmd} --collect-only -q", "python -m nltk.downloader punkt"]
    unittest = EnvSpec.from_dict({**base, "log_parser": "unittest", "test_cmd": "python -m unittest -v"})
    assert unittest.warmup_commands() == []


@needs_shared
def test_swesmith_specs_carry_conda_pins_the_interpreter_and_a_date(smith: Catalog) -> None:
    dom = smith["Knio__dominate.9082227e"]
    assert {"pip==24.2", "setuptools==75.1.0", "wheel==0.44.0"} <= set(dom.requirements)
    assert dom.python_full == "3.10.15"
    # pytest 8.3.4 (2024-12-01) is the newest dated package of that export
    assert dom.exclude_newer == "2024-12-02T00:00:00Z" and "pytest==8.3.4" in dom.extra["exclude_newer_source"]
    for spec in smith:
        assert spec.exclude_newer, spec.name
        names = [r.split("==")[0].lower() for r in spec.requirements]
        assert len(names) == len(set(names)), f"{spec.name}: a name pinned twice"
        # conda-only projects that are unrelated on PyPI are never pinned
        assert not {"tk", "xz", "readline", "openssl", "sqlite", "ncurses", "zlib"} & set(names), spec.name
    # a pip-section pin wins over the conda section's (the image installed pip's last)
    pdf = smith["jsvine__pdfplumber.02ff4313"]
    assert [r for r in pdf.requirements if r.startswith("setuptools==")] == ["setuptools==68.2.2"]
    assert "setuptools==75.8.0" not in pdf.extra["conda_pins"]
    hydra = smith["facebookresearch__hydra.0f03eb60"]
    assert hydra.system_packages == ("openjdk-17-jdk", "openjdk-17-jre")


# -- the catalog entry's model --------------------------------------------------------------


def test_the_spec_model_and_envspec_have_the_same_fields_and_defaults_and_every_field_says_what_it_is() -> None:
    """One config style: a catalog entry is checked by a pydantic model (unknown keys
    forbidden, a docstring per field); EnvSpec, the value every module passes around, has
    exactly its fields, so neither can gain one the other lacks."""
    import dataclasses

    from minisandbox.catalog import spec_model

    model = spec_model()
    assert model.model_config["extra"] == "forbid"
    fields = {f.name: f for f in dataclasses.fields(EnvSpec)}
    assert list(model.model_fields) == list(fields)
    for name, info in model.model_fields.items():
        assert info.description, f"spec field {name!r} has no docstring"
        dc = fields[name]
        if dc.default is not dataclasses.MISSING:
            assert info.default == dc.default, name
        elif dc.default_factory is not dataclasses.MISSING:
            assert info.default == dc.default_factory(), name
        else:
            assert info.is_required() or name == "commit", name


def test_a_misspelled_log_parser_names_the_file_spec_field_and_the_choices(tmp_path: Path) -> None:
    path = write(tmp_path, "lp.yaml", GOOD + "    log_parser: pytset\n")
    with pytest.raises(CatalogError) as exc:
        Catalog.load([path])
    msg = one_line_error(exc)
    assert msg.startswith(f"{path} (spec #1): spec 'a__b.12345678': log_parser 'pytset' is not one of pytest, ")
    assert "(log parsers: minisandbox.logformats)" in msg and "\n" not in str(exc.value)


def test_pinned_major_reads_the_specs_pin() -> None:
    """The pytest a spec pins decides the suite's collection order in grading
    (`minisandbox.grading.evaluate.suite_order`)."""
    from minisandbox.catalog import EnvSpec

    spec = EnvSpec.from_dict(
        {
            "name": "o__r.1",
            "kind": "swesmith",
            "source": "https://x/o/r",
            "commit": "1" * 40,
            "python": "3.11",
            "requirements": ["Pytest == 7.4.4", "pluggy==1.5.0", "pytest-cov==5.0"],
        }
    )
    assert spec.pinned_major("pytest") == 7
    assert spec.pinned_major("pluggy") == 1
    assert spec.pinned_major("hypothesis") is None
