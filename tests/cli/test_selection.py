"""`--instance-ids` (ids, or @FILE) and `--repo` on `tasks`, `fetch` and `eval`: one filter
(`minisandbox.records.Selection`), the same one-line errors everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minisandbox.cli import main
from minisandbox.records import Selection, SelectionError, read_id_file, repo_names

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "config" / "bundled" / "tasks.jsonl"
TASKS_SWEBENCH = ROOT / "config" / "bundled" / "tasks_swebench.jsonl"
OTHER_CATALOG = ROOT / "config" / "catalog" / "swebench.yaml"  # no spec for the bundled tasks: graded as errors


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minisandbox.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MINISANDBOX_PROGRESS_INTERVAL": "0"},
        cwd=cwd,
    )


# ------------------------------------------------------------------------------ the filter
def test_repo_names_answer_to_owner_name_in_both_formats() -> None:
    assert "jpvanhal/inflection" in repo_names("swesmith/jpvanhal__inflection.09fb3146")
    assert "jpvanhal__inflection.09fb3146" in repo_names("swesmith/jpvanhal__inflection.09fb3146")
    assert repo_names("R1chardj0n3s/Parse") == {"r1chardj0n3s/parse"}
    sel = Selection.parse(None, ["R1CHARDJ0N3S/parse"])
    assert sel.matches("x", "r1chardj0n3s/parse") and not sel.matches("x", "pytoolz/toolz")


def test_id_files_plain_or_json_and_bad_ids(tmp_path: Path) -> None:
    plain = tmp_path / "ids.txt"
    plain.write_text("a__b-1  # the first\n\nc__d-2\n")
    assert read_id_file(plain) == ["a__b-1", "c__d-2"]
    js = tmp_path / "ids.json"
    js.write_text('["x__y-3", "a__b-1"]')
    sel = Selection.parse([f"@{plain}", f"@{js}", "z__z-9"])
    assert sel.ids == ("a__b-1", "c__d-2", "x__y-3", "z__z-9")
    with pytest.raises(SelectionError, match="to read ids from the file, write @"):
        Selection.parse([str(plain)])  # a path given as an id
    bad = tmp_path / "bad.txt"
    bad.write_text("ok__1 ../etc\n")
    with pytest.raises(SelectionError, match=r"id 2 '\.\./etc' is not an instance id"):
        read_id_file(bad)
    with pytest.raises(SelectionError, match="file of instance ids .*missing.txt"):
        Selection.parse([f"@{tmp_path / 'missing.txt'}"])


# ------------------------------------------------------------------------------ tasks
def test_tasks_filtered_by_ids_reads_only_their_shards(published_store, monkeypatch, capsys, tmp_path) -> None:
    from minisandbox.node.store import Store

    reads: list[str] = []
    real = Store.read_bytes

    def spy(self, rel: str) -> bytes:
        reads.append(rel)
        return real(self, rel)

    monkeypatch.setattr(Store, "read_bytes", spy)
    ids = tmp_path / "ids.txt"
    ids.write_text("demo__proj.0002\n")
    assert (
        main(["tasks", "--store", published_store["url"], "--json", "--instance-ids", "demo__proj.0000", f"@{ids}"])
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["instance_id"] for r in rows) == ["demo__proj.0000", "demo__proj.0002"]
    assert len([r for r in reads if r.startswith("index/tasks/")]) == 2


def test_tasks_filtered_by_repo_and_typos_are_one_line_errors(published_store, capsys) -> None:
    assert main(["tasks", "--store", published_store["url"], "--repo", "Demo/Proj", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4
    res = _cli("tasks", "--store", published_store["url"], "--repo", "demo/proj", "nobody/else")
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == (
        f"minisandbox tasks: error: --repo: no task of nobody/else in store "
        f"{published_store['url']} (give owner/name, as `minisandbox tasks` "
        f"lists the tasks)"
    )
    res = _cli(
        "tasks", "--store", published_store["url"], "--instance-ids", "demo__proj.0001", "demo__nope.1", "--json"
    )
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.splitlines()[-1] == (
        f"minisandbox tasks: error: --instance-ids: 1 id(s) name no task in "
        f"store {published_store['url']}: demo__nope.1"
    )


# ------------------------------------------------------------------------------ fetch
def test_fetch_a_subset_by_file_of_ids_or_repo(published_store, tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("demo__proj.0001\n")
    res = _cli(
        "fetch",
        "--store",
        published_store["url"],
        "--cache",
        str(tmp_path / "cache"),
        "--json",
        "demo__proj.0000",
        "--instance-ids",
        f"@{ids}",
    )
    assert res.returncode == 0, res.stderr
    assert [r["instance_id"] for r in json.loads(res.stdout)] == ["demo__proj.0000", "demo__proj.0001"]
    # --repo: every task of it, the env-failed one reported as failed (exit 1)
    res = _cli(
        "fetch", "--store", published_store["url"], "--cache", str(tmp_path / "cache"), "--json", "--repo", "demo/proj"
    )
    assert res.returncode == 1
    rows = json.loads(res.stdout)
    assert sorted(r["instance_id"] for r in rows) == sorted(t["instance_id"] for t in published_store["tasks"])
    assert [r["instance_id"] for r in rows if "error" in r] == ["demo__proj.broken"]
    res = _cli("fetch", "--store", published_store["url"], "--cache", str(tmp_path / "cache"))
    assert (res.returncode, res.stderr) == (
        1,
        "minisandbox fetch: error: no task to fetch: give task ids, --instance-ids ID|@FILE or --repo OWNER/NAME\n",
    )


# ------------------------------------------------------------------------------ eval
def _preds(tmp_path: Path, ids: list[str]) -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_text(
        "".join(json.dumps({"instance_id": i, "model_patch": "", "model_name_or_path": "m"}) + "\n" for i in ids)
    )
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_eval_on_a_subset_of_a_predictions_file_evaluates_that_subset(tmp_path: Path) -> None:
    """Predictions for every bundled task plus ones for tasks that are not there: without a
    filter the run fails naming the unknown ones; with --instance-ids or --repo only the
    subset is graded and the run succeeds."""
    recs = _records(TASKS) + _records(TASKS_SWEBENCH)
    ids = [r["instance_id"] for r in recs]
    preds = _preds(tmp_path, [*ids, "elsewhere__repo-1", "elsewhere__repo-2"])
    base = (
        "eval",
        "--predictions",
        str(preds),
        "--tasks",
        str(TASKS),
        str(TASKS_SWEBENCH),
        "--catalog",
        str(OTHER_CATALOG),
        "--json",
        "--workers",
        "4",
    )
    res = _cli(*base, "--out", str(tmp_path / "all"))
    assert res.returncode == 1 and "2 prediction(s) name no task" in res.stderr
    pick = tmp_path / "subset.txt"
    pick.write_text("\n".join(ids[:2]) + "\n")
    res = _cli(*base, "--out", str(tmp_path / "ids"), "--instance-ids", f"@{pick}")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["submitted_ids"] == sorted(ids[:2]) and summary["total_instances"] == 2
    parse = sorted(
        r["instance_id"] for r in recs if r["repo"] in ("r1chardj0n3s/parse", "swesmith/r1chardj0n3s__parse.0d3cb03d")
    )
    res = _cli(*base, "--out", str(tmp_path / "repo"), "--repo", "r1chardj0n3s/parse")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["submitted_ids"] == parse and summary["empty_patch_ids"] == parse and len(parse) == 6
    assert sorted(p.name for p in (tmp_path / "repo" / "minisandbox" / "m").iterdir()) == parse
    # both: the intersection
    res = _cli(
        *base, "--out", str(tmp_path / "both"), "--repo", "r1chardj0n3s/parse", "--instance-ids", parse[0], ids[0]
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["submitted_ids"] == [parse[0]]


def test_eval_filters_that_name_nothing_fail_before_grading(tmp_path: Path) -> None:
    ids = [r["instance_id"] for r in _records(TASKS)]
    preds = _preds(tmp_path, ids)
    base = (
        "eval",
        "--predictions",
        str(preds),
        "--tasks",
        str(TASKS),
        "--catalog",
        str(OTHER_CATALOG),
        "--out",
        str(tmp_path / "out"),
    )
    res = _cli(*base, "--instance-ids", ids[0], "typo__x-1")
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr == (
        f"minisandbox eval: error: --instance-ids: 1 id(s) name no task in the predictions file {preds}: typo__x-1\n"
    )
    res = _cli(*base, "--repo", "nobody/nothing")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("minisandbox eval: error: --repo: no task of nobody/nothing in the tasks of")
    assert not (tmp_path / "out").exists()
