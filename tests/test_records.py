"""Task ingestion: both formats, three file types, and every malformed case.

A malformed record or file is reported with file, line, field and never stops the others.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from minisandbox.records import (
    InvalidRecord,
    RecordError,
    TaskRecord,
    changed_by,
    normalize,
    read_tasks,
    task_test_files,
)

PATCH = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
TEST_PATCH = "diff --git a/tests/test_m.py b/tests/test_m.py\n--- a/tests/test_m.py\n+++ b/tests/test_m.py\n@@ -1 +1 @@\n-x\n+y\n"
BASE = "0123456789abcdef0123456789abcdef01234567"
SETUP = "fedcba9876543210fedcba9876543210fedcba98"


def smith(iid: str = "arrow-py__arrow.1d70d009.func_pm__abcd1234", **over: Any) -> dict[str, Any]:
    rec = {
        "instance_id": iid,
        "repo": "swesmith/arrow-py__arrow.1d70d009",
        "patch": PATCH,
        "FAIL_TO_PASS": ["tests/test_m.py::test_a"],
        "PASS_TO_PASS": ["tests/test_m.py::test_b", "tests/test_m.py::test_c[a b]"],
        "image_name": "swebench/swesmith.x86_64.arrow-py_1776_arrow.1d70d009",
        "problem_statement": "a is wrong",
    }
    rec.update(over)
    return rec


def bench(iid: str = "django__django-11099", **over: Any) -> dict[str, Any]:
    rec = {
        "instance_id": iid,
        "repo": "django/django",
        "base_commit": BASE,
        "environment_setup_commit": SETUP,
        "version": "3.0",
        "patch": PATCH,
        "test_patch": TEST_PATCH,
        "FAIL_TO_PASS": json.dumps(["test_a (m.tests.T)"]),
        "PASS_TO_PASS": json.dumps([]),
        "problem_statement": "issue",
    }
    rec.update(over)
    return rec


def drop(rec: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != key}


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


# -- valid records -------------------------------------------------------------------


def test_swesmith_record_is_normalised() -> None:
    rec = normalize(smith())
    assert rec.format == "swesmith"
    assert rec.swesmith_profile == "arrow-py__arrow.1d70d009"
    assert rec.fail_to_pass == ["tests/test_m.py::test_a"]
    assert rec.pass_to_pass[1] == "tests/test_m.py::test_c[a b]"
    assert rec.base_commit == "" and rec.version == ""
    assert rec.image_name.startswith("swebench/swesmith")


def test_swebench_record_lists_from_json_strings_and_setup_commit() -> None:
    rec = normalize(bench())
    assert rec.format == "swebench"
    assert rec.fail_to_pass == ["test_a (m.tests.T)"] and rec.pass_to_pass == []
    assert (rec.base_commit, rec.environment_setup_commit, rec.version) == (BASE, SETUP, "3.0")
    assert rec.test_patch == TEST_PATCH
    # environment_setup_commit defaults to base_commit; an integer version becomes a string
    rec2 = normalize(drop(bench(version=2), "environment_setup_commit"))
    assert rec2.environment_setup_commit == BASE and rec2.version == "2"


def test_record_round_trips_through_dict() -> None:
    rec = normalize(bench())
    assert TaskRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_jsonl_json_and_parquet_give_the_same_records(tmp_path: Path) -> None:
    records = [smith(), bench()]
    jsonl = write_jsonl(tmp_path / "t.jsonl", records)
    as_json = tmp_path / "t.json"
    as_json.write_text(json.dumps(records))
    single = tmp_path / "one.json"
    single.write_text(json.dumps(bench("django__django-1")))
    # Parquet as the datasets ship it: SWE-smith lists are list<string>, SWE-bench's are strings.
    pq.write_table(pa.Table.from_pylist([smith()]), tmp_path / "smith.parquet")
    pq.write_table(pa.Table.from_pylist([bench()]), tmp_path / "bench.parquet")

    from_jsonl = read_tasks([jsonl])
    from_json = read_tasks([as_json])
    from_parquet = read_tasks([tmp_path / "smith.parquet", tmp_path / "bench.parquet"])
    assert from_jsonl.invalid == from_json.invalid == from_parquet.invalid == []
    assert from_jsonl.records == from_json.records == from_parquet.records
    assert [r.format for r in from_parquet.records] == ["swesmith", "swebench"]
    assert from_parquet.records[0].pass_to_pass[1] == "tests/test_m.py::test_c[a b]"
    assert read_tasks([single]).records[0].instance_id == "django__django-1"


# -- malformed records: each reported with file, line and field, the rest still read ---

MALFORMED: list[tuple[str, Any, str]] = [
    ("bad JSON line", '{"instance_id": "x", ', "<json>"),
    ("not an object", ["a", "list"], "<record>"),
    ("a bare string", '"just a string"', "<record>"),
    ("missing instance_id", drop(smith(), "instance_id"), "instance_id"),
    ("instance_id not a string", smith(iid=12345), "instance_id"),  # type: ignore[arg-type]
    ("instance_id with a slash", smith(iid="a/b"), "instance_id"),
    ("instance_id '..' (names log directories)", smith(iid=".."), "instance_id"),
    ("instance_id '.'", smith(iid="."), "instance_id"),
    ("missing repo", drop(smith("m1"), "repo"), "repo"),
    ("repo not owner/name", smith("m2", repo="arrow"), "repo"),
    ("repo not a string", smith("m3", repo=["swesmith/x"]), "repo"),
    ("missing patch", drop(smith("m4"), "patch"), "patch"),
    ("patch not a diff", smith("m5", patch="hello"), "patch"),
    ("missing FAIL_TO_PASS", drop(smith("m6"), "FAIL_TO_PASS"), "FAIL_TO_PASS"),
    ("missing PASS_TO_PASS", drop(smith("m7"), "PASS_TO_PASS"), "PASS_TO_PASS"),
    ("FAIL_TO_PASS not a list", smith("m8", FAIL_TO_PASS={"a": 1}), "FAIL_TO_PASS"),
    ("FAIL_TO_PASS a number", smith("m9", FAIL_TO_PASS=5), "FAIL_TO_PASS"),
    ("FAIL_TO_PASS invalid JSON string", bench("b1", FAIL_TO_PASS='["a", '), "FAIL_TO_PASS"),
    ("FAIL_TO_PASS JSON string of an object", bench("b2", FAIL_TO_PASS='{"a": 1}'), "FAIL_TO_PASS"),
    ("PASS_TO_PASS with a non-string id", smith("m10", PASS_TO_PASS=["ok", 3]), "PASS_TO_PASS"),
    ("bad base_commit", bench("b3", base_commit="not-a-commit"), "base_commit"),
    ("base_commit not a string", bench("b4", base_commit=1234567), "base_commit"),
    ("missing base_commit (SWE-bench)", drop(bench("b5"), "base_commit"), "base_commit"),
    ("bad environment_setup_commit", bench("b6", environment_setup_commit="zzz"), "environment_setup_commit"),
    ("missing version", drop(bench("b7"), "version"), "version"),
    ("empty version", bench("b8", version=""), "version"),
    ("float version (3.10 would read as 3.1)", bench("b9", version=3.1), "version"),
    ("missing test_patch", drop(bench("b10"), "test_patch"), "test_patch"),
]


@pytest.mark.parametrize("label,bad,field_name", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_record_is_reported_and_not_fatal(tmp_path: Path, label: str, bad: Any, field_name: str) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", [smith("good__one"), bad, bench("good__two")])
    got = read_tasks([path])
    assert [r.instance_id for r in got.records] == ["good__one", "good__two"], label
    assert len(got.invalid) == 1, got.invalid
    inv = got.invalid[0]
    assert (inv.file, inv.line, inv.field) == (str(path), 2, field_name)
    assert inv.error and "\n" not in inv.error
    assert str(inv).startswith(f"{path}:2")


def test_all_malformed_cases_in_one_file(tmp_path: Path) -> None:
    """Every case together: each line reported once, at its own line number."""
    lines = [smith("first__ok")] + [m[1] for m in MALFORMED] + [bench("last__ok")]
    path = write_jsonl(tmp_path / "all.jsonl", lines)
    got = read_tasks([path])
    assert [r.instance_id for r in got.records] == ["first__ok", "last__ok"]
    assert [(i.line, i.field) for i in got.invalid] == [(n + 2, m[2]) for n, m in enumerate(MALFORMED)]


def test_blank_lines_are_skipped_and_line_numbers_stay_true(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(smith("a__1")) + "\n\n   \n" + '{"broken"\n')
    got = read_tasks([path])
    assert [r.instance_id for r in got.records] == ["a__1"]
    assert [(i.line, i.field) for i in got.invalid] == [(4, "<json>")]


def test_json_errors_name_the_column_python_names(tmp_path: Path) -> None:
    """The column is the one `json.loads` of that line reports (what a user checks with
    Python or an editor), in .jsonl files and in .json files."""
    bad = '{"instance_id": "a", "repo": x}'
    want = f"(column {bad.index('x') + 1})"  # 30
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(smith("a__1")) + "\n" + bad + "\n")
    got = read_tasks([path])
    assert [(i.line, i.error) for i in got.invalid] == [(2, f"invalid JSON: Expecting value {want}")]
    whole = tmp_path / "t.json"
    whole.write_text("[\n" + bad + "\n]")
    assert [(i.line, i.error) for i in read_tasks([whole]).invalid] == [
        (2, f"invalid JSON: Expecting value {want}; fix the file and rerun")
    ]


def test_a_json_file_holding_one_record_per_line_is_read_as_jsonl(tmp_path: Path) -> None:
    """Dataset exports often name JSONL files .json: a whole-file parse would blame "line 2
    column 1" (Extra data) for any error further down."""
    path = tmp_path / "export.json"
    bad = '{"instance_id": "a", "repo": x}'
    path.write_text(json.dumps(smith("a__1")) + "\n" + json.dumps(smith("a__2")) + "\n" + bad + "\n")
    got = read_tasks([path])
    assert [r.instance_id for r in got.records] == ["a__1", "a__2"]
    assert [(i.line, i.error) for i in got.invalid] == [(3, "invalid JSON: Expecting value (column 30)")]


def test_non_utf8_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"instance_id": "\xff"}\n' + json.dumps(smith("a__1")).encode() + b"\n")
    got = read_tasks([path])
    assert [r.instance_id for r in got.records] == ["a__1"]
    assert [(i.line, i.field) for i in got.invalid] == [(1, "<json>")]


def test_duplicate_instance_id_within_and_across_files(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [smith("dup__1"), smith("dup__1")])
    b = tmp_path / "b.json"
    b.write_text(json.dumps([smith("other__1"), smith("dup__1")]))
    got = read_tasks([a, b])
    assert [r.instance_id for r in got.records] == ["dup__1", "other__1"]
    assert [(i.file, i.line, i.field, i.instance_id) for i in got.invalid] == [
        (str(a), 2, "instance_id", "dup__1"),
        (str(b), 2, "instance_id", "dup__1"),
    ]
    assert all(f"duplicate of {a}:1" == i.error for i in got.invalid)


def test_malformed_rows_in_json_array_and_parquet_report_their_position(tmp_path: Path) -> None:
    arr = tmp_path / "t.json"
    arr.write_text(json.dumps([smith("a__1"), 7, drop(smith("a__2"), "patch")]))
    got = read_tasks([arr])
    assert [r.instance_id for r in got.records] == ["a__1"]
    assert [(i.line, i.field) for i in got.invalid] == [(2, "<record>"), (3, "patch")]

    rows = [bench("p__1"), bench("p__2", FAIL_TO_PASS="[not json"), bench("p__3", base_commit="xyz")]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    got = read_tasks([tmp_path / "t.parquet"])
    assert [r.instance_id for r in got.records] == ["p__1"]
    assert [(i.line, i.field, i.instance_id) for i in got.invalid] == [
        (2, "FAIL_TO_PASS", "p__2"),
        (3, "base_commit", "p__3"),
    ]


# -- file-level problems: reported at line 0, the other files still read --------------


def test_bad_files_are_reported_and_other_files_still_read(tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [smith("g__1")])
    missing = tmp_path / "missing.jsonl"
    csv = tmp_path / "tasks.csv"
    csv.write_text("instance_id,repo\n")
    broken_json = tmp_path / "broken.json"
    broken_json.write_text('[{"instance_id": "x"},\n  oops]')
    scalar_json = tmp_path / "scalar.json"
    scalar_json.write_text("42")
    corrupt_parquet = tmp_path / "corrupt.parquet"
    corrupt_parquet.write_bytes(b"this is not parquet")
    got = read_tasks([missing, csv, broken_json, scalar_json, corrupt_parquet, good])
    assert [r.instance_id for r in got.records] == ["g__1"]
    found = {(Path(i.file).name, i.line, i.field) for i in got.invalid}
    assert found == {
        ("missing.jsonl", 0, "<file>"),
        ("tasks.csv", 0, "<file>"),
        ("broken.json", 2, "<json>"),
        ("scalar.json", 1, "<json>"),
        ("corrupt.parquet", 0, "<file>"),
    }
    by_name = {Path(i.file).name: i.error for i in got.invalid}
    assert "does not exist" in by_name["missing.jsonl"]
    assert "unsupported task file type '.csv'" in by_name["tasks.csv"]
    assert all("\n" not in e for e in by_name.values())


def test_normalize_raises_record_error_naming_the_field() -> None:
    with pytest.raises(RecordError) as exc:
        normalize(drop(bench(), "version"))
    assert exc.value.field == "version"


def test_invalid_record_dict_is_json_serialisable() -> None:
    inv = InvalidRecord("f.jsonl", 3, "patch", "missing", "x__1")
    assert json.loads(json.dumps(inv.to_dict())) == {
        "file": "f.jsonl",
        "line": 3,
        "field": "patch",
        "error": "missing",
        "instance_id": "x__1",
    }
    assert str(inv) == "f.jsonl:3 (x__1): field 'patch': missing"


def test_labelling_candidates_are_accepted_in_label_mode_only(tmp_path: Path) -> None:
    """A SWE-smith record without FAIL_TO_PASS/PASS_TO_PASS is a labelling candidate in
    label mode, and an invalid record everywhere else."""
    cand = drop(drop(smith("a__b.1.cand__1"), "FAIL_TO_PASS"), "PASS_TO_PASS")
    empty = smith("a__b.1.cand__2", FAIL_TO_PASS=[], PASS_TO_PASS="")
    f = write_jsonl(tmp_path / "c.jsonl", [cand, empty, bench()])
    plain = read_tasks([f])
    assert [(r.line, r.field, r.error) for r in plain.invalid] == [
        (1, "FAIL_TO_PASS", "missing"),
        (2, "PASS_TO_PASS", "not a JSON list: Expecting value"),
    ]
    lab = read_tasks([f], label=True)
    assert [(r.instance_id, r.fail_to_pass, r.pass_to_pass) for r in lab.records] == [
        ("a__b.1.cand__1", [], []),
        ("a__b.1.cand__2", [], []),
    ]
    assert [(r.line, r.field) for r in lab.invalid] == [(3, "repo")] and "SWE-smith" in lab.invalid[0].error
    with pytest.raises(RecordError, match="missing"):
        normalize(cand)


def test_a_file_the_tasks_patch_changes_is_no_test_file_of_the_task():
    bug = "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-a\n+b\n"
    ids = ["pkg/mod.py::pkg.mod.f", "tests/test_mod.py::test_f", "tests/test_mod.py::test_g"]
    assert task_test_files(ids, bug) == ["tests/test_mod.py"]
    assert changed_by(bug, "pkg/mod.py") and not changed_by(bug, "pkg/mod") and not changed_by(bug, "tests/test_mod.py")
    deleted = "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n"
    assert changed_by(deleted, "old.py")
