"""bench/report.py on the committed quick-run data (docs/benchmarks/data): every section
gets its plot and table, a missing input is named, and the numbers in the tables are the
medians of the saved samples (not re-typed)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "benchmarks" / "data"


def load_report():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_from_saved_data(tmp_path):
    out = tmp_path / "docs" / "benchmarks.md"
    assert load_report().main(["--data", str(DATA), "--out", str(out)]) == 0
    text = out.read_text()
    pngs = sorted(p.name for p in (tmp_path / "docs" / "benchmarks").glob("*.png"))
    assert pngs == [
        "concurrency.png",
        "planning.png",
        "restore_by_method.png",
        "restore_concurrent_by_method.png",
        "sandbox_creation.png",
        "store_size_by_format.png",
    ]
    for name in pngs:
        assert f"(benchmarks/{name})" in text
        assert (tmp_path / "docs" / "benchmarks" / name).stat().st_size < 100_000  # small enough to commit
    rt = json.loads((DATA / "bench_runtime.json").read_text())
    cold = statistics.median(rt["single"]["cold"]["squashfs"])
    assert f"| root squashfs | {cold:.3f} |" in text
    sizes = rt["single"]["sizes"]
    assert f"| tar.zst | {sizes['tar.zst'] / 1e6:.1f} |" in text
    cli = json.loads((DATA / "bench_cli.json").read_text())
    version = next(r for r in cli["latency_rows"]["rows"] if r[0].startswith("`minisandbox --version`"))
    assert f"| {version[0]} | {version[1]} | {version[2]} |" in text  # the CLI bench's rows, as it saved them
    assert f"Load average {cli['machine']['load_start']} when the latency rows' sampling started" in text
    for heading in (
        "Restore time by method",
        "Sandbox creation distribution",
        "Concurrency curves",
        "Planning time vs task count",
        "CLI start-up",
        "Store size by format",
    ):
        assert f"## {heading}" in text


def test_missing_inputs_are_named(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(DATA / "bench_sandbox.json", data)
    out = tmp_path / "benchmarks.md"
    assert load_report().main(["--data", str(data), "--out", str(out)]) == 0
    text = out.read_text()
    assert "Missing input (section left empty): bench_runtime.json, bench_pipeline.json." in text
    assert "(benchmarks/sandbox_creation.png)" in text
    assert load_report().main(["--data", str(tmp_path / "nowhere"), "--out", str(out)]) == 1
