"""`minisandbox plan` and the `minisandbox pipeline <step>` group.

`plan` is a user command (expand task files into the unique repos and environments a build
needs). Everything under `pipeline` is one step of the Snakemake workflow: the rules stay
thin and call these, one subcommand per rule. A step that fails records the failure in its
status file and exits 0 (a failed build is a result the index reports, not a workflow
error), so these commands are not meant to be run by hand except to debug a rule.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from minisandbox.fsutil import atomic_write_text


# ----------------------------------------------------------------------------- plan
def cmd_plan(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.plan import PlanError, format_invalid, invalid_summary, load_or_build_plan

    plan = load_or_build_plan(a.tasks, a.catalog, Path.cwd(), Path(a.plan_dir))
    for rec in plan.invalid:  # stderr: stdout stays the result alone (JSON with --json)
        print(f"INVALID {format_invalid(rec)}", file=sys.stderr)
    counts = {"tasks": plan.n_tasks, "envs": len(plan.envs), "repos": len(plan.repos),
              "sources": len(plan.sources), "invalid": len(plan.invalid)}
    if a.json:
        print(json.dumps({**counts, "invalid_records": plan.invalid}, indent=1))
    else:
        print(f"{counts['tasks']} tasks -> {counts['envs']} environments, {counts['repos']} repo snapshots "
              f"from {counts['sources']} sources; {counts['invalid']} invalid records")
    _, fatal = invalid_summary(plan)
    if fatal:
        raise PlanError(fatal)
    return 0


# ----------------------------------------------------------------------------- steps
# Each step returns 0 when it recorded its result (ok or failed) in its status file.

def cmd_bundled(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.bundled import materialize

    repos = materialize(Path(a.dest))
    atomic_write_text(a.done, json.dumps({k: str(v) for k, v in sorted(repos.items())}, indent=1) + "\n")
    return 0


def cmd_mirror(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_mirror

    step_mirror(Path(a.spec), Path(a.mirror), Path(a.status), Path(a.log))
    return 0


def cmd_snapshot(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_snapshot

    step_snapshot(Path(a.spec), Path(a.mirror), Path(a.mirror_status), Path(a.out), Path(a.status))
    return 0


def cmd_resolve(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_resolve

    step_resolve(Path(a.spec), Path(a.repo), Path(a.repo_status), Path(a.out), Path(a.log))
    return 0


def cmd_build(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_build

    step_build(Path(a.spec), Path(a.lock), Path(a.repo), Path(a.out), Path(a.status), Path(a.log), a.timeout)
    return 0


def cmd_pack(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_pack

    step_pack(a.key, Path(a.tree), Path(a.upstream), Path(a.out), Path(a.status), a.format, a.level, image=a.image,
              with_archive=not a.no_archive)
    return 0


def cmd_checksum(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_checksum

    step_checksum(a.kind, Path(a.spec), Path(a.archive), Path(a.pack_status), Path(a.upstream), Path(a.out))
    return 0


def cmd_publish(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_publish

    step_publish(a.store, a.kind, a.key, Path(a.manifest), Path(a.archive), Path(a.log) if a.log else None,
                 Path(a.out), image_whole=a.image_whole)
    return 0


NO_ARCHIVE_HELP = ("with --image, publish no tar archive: the store serves the layer as the image's chunks "
                   "only (config archive: false)")
IMAGE_WHOLE_HELP = ("also upload each image as one file (by default only its chunks and chunk list, from which "
                    "nodes assemble it: config image_whole)")


def _summary(st) -> str:
    return f"{st.key}: {'ok' if st.ok else 'FAILED ' + (st.error or '')}"


def cmd_repo(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import job_repo

    sid = json.loads(Path(a.spec).read_text())["source_id"]
    source_spec = Path(a.work) / "specs" / "source" / f"{sid}.json"  # written at planning time
    st = job_repo(Path(a.work), a.store, Path(a.spec), source_spec, a.format, a.level, a.image, Path(a.out),
                  image_whole=a.image_whole, with_archive=not a.no_archive)
    print(f"repo {_summary(st)}")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    """The workflow's job for one environment (`minisandbox.workflowjobs.env_job`): its own
    repo snapshot when nothing else uses it, the build and publish (reused when only
    validation inputs changed), then the validation (or labelling) of its tasks."""
    from minisandbox.workflowjobs import EnvJobRequest, EnvJobSettings, env_job

    settings = EnvJobSettings(store=args.store, fmt=args.format, level=args.level, image=args.image,
                              image_whole=args.image_whole, timeout=args.timeout, archive=not args.no_archive)
    job = EnvJobRequest(work=Path(args.work), spec=Path(args.spec), plan=Path(args.plan), receipt=Path(args.out),
                        output=Path(args.validation), validate=args.validate, label=args.label, repeats=args.repeats,
                        workers=args.workers, max_f2p=args.max_f2p)
    for line in env_job(settings, job).lines:
        print(line)
    return 0


def cmd_interp(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.interplayer import step_interp

    st = step_interp(Path(a.spec), a.store, Path(a.work), Path(a.out), a.format, a.level)
    print(f"interpreter layer {st.key}: " + ("published" if st.ok else st.error))
    return 0


def cmd_validate(a: argparse.Namespace) -> int:
    from minisandbox.grading.validate import step_validate

    res = step_validate(Path(a.plan), a.env_key, Path(a.receipts), a.store, Path(a.out), Path(a.logs),
                        repeats=a.repeats, workers=a.workers)
    counts = res.counts()
    print(f"validated {len(res.tasks)} task(s) of {a.env_key} in {res.seconds:.1f} s: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def _validation_files(a: argparse.Namespace) -> list[Path]:
    """`--validation FILE...` plus, with `--validation-dir`, every planned environment's
    result in it (the workflow passes the directory: one file per env job)."""
    from minisandbox.errors import MinisandboxError

    files = [Path(v) for v in a.validation]
    if a.validation_dir:
        if not a.plan:
            raise MinisandboxError("--validation-dir needs --plan (which environments to read)")
        envs = json.loads(Path(a.plan).read_text())["envs"]
        files += [Path(a.validation_dir) / f"{k}.json" for k in sorted(envs)]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise MinisandboxError(f"validation result {missing[0]} does not exist ({len(missing)} missing); "
                               f"its env job writes it: rerun the workflow")
    return files


def cmd_validated_tasks(a: argparse.Namespace) -> int:
    from minisandbox.grading.validate import validated_ids
    from minisandbox.records import TaskRecord, to_raw

    valid = set(validated_ids(_validation_files(a)))
    lines = []
    with open(a.tasks, encoding="utf-8") as src:
        for line in src:
            t = json.loads(line)
            if t.get("instance_id") in valid:
                lines.append(json.dumps(to_raw(TaskRecord.from_dict(t["record"])), ensure_ascii=False) + "\n")
    atomic_write_text(a.out, "".join(lines))
    print(f"{len(lines)} valid task(s) written to {a.out}")
    return 0


def cmd_labelled_tasks(a: argparse.Namespace) -> int:
    """Label mode's last step: the labelled candidates as SWE-smith records, and a report
    naming every dropped candidate with its status and reason."""
    from minisandbox.errors import MinisandboxError
    from minisandbox.grading.label import read_results, write_labelled
    from minisandbox.records import TaskRecord

    plan = json.loads(Path(a.plan).read_text())
    files = [Path(a.labels_dir) / f"{k}.json" for k in sorted(plan.get("envs", {}))]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise MinisandboxError(f"labelling result {missing[0]} does not exist ({len(missing)} missing); "
                               f"run the workflow with --config label=true")
    with open(a.tasks, encoding="utf-8") as src:
        records = [TaskRecord.from_dict(json.loads(line)["record"]) for line in src if line.strip()]
    doc = write_labelled(records, read_results(files), Path(a.out), Path(a.report))
    print(f"{doc['labelled']} of {doc['candidates']} candidate(s) labelled, written to {a.out}; "
          + ", ".join(f"{k} {v}" for k, v in doc["counts"].items() if v) + f" (dropped ones in {a.report})")
    return 0


def cmd_index(a: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import format_report, step_index

    report = step_index(a.store, Path(a.plan), Path(a.receipts), _validation_files(a), Path(a.out), Path(a.report))
    text = format_report(report)
    atomic_write_text(Path(a.report).with_suffix(".txt"), text + "\n")
    print(text)
    return 0


# ----------------------------------------------------------------------------- label
def cmd_label(a: argparse.Namespace) -> int:
    """`minisandbox label`: label a handful of candidates against a published store whose
    environments they use (docs/labelling.md); the workflow's `label=true` is the batch
    form (builds what is missing, one job per environment)."""
    from minisandbox.catalog import Catalog, CatalogError, default_catalog_paths, spec_for, task_commit
    from minisandbox.errors import MinisandboxError
    from minisandbox.grading.evaluate import LayerExecutor
    from minisandbox.grading.label import label_env, write_labelled, write_result
    from minisandbox.node.published import read_catalog
    from minisandbox.node.store import open_store
    from minisandbox.pipeline.keys import repo_key
    from minisandbox.records import read_tasks

    ing = read_tasks(a.tasks, label=True)
    for bad in ing.invalid:
        print(f"minisandbox label: skipping invalid record {bad}", file=sys.stderr)
    if not ing.records:
        raise MinisandboxError(f"no labelling candidate in {' '.join(a.tasks)}: SWE-smith records with `instance_id`, "
                               f"`repo` (swesmith/<profile>) and `patch` (the bug) are needed")
    catalogs = a.catalog or default_catalog_paths()
    if not catalogs:
        raise CatalogError("no environment catalog found; pass --catalog config/catalog/<name>.yaml")
    catalog = Catalog.load(catalogs)
    store = open_store(a.store)
    index = read_catalog(store)
    envs = {e.get("spec_name"): e for e in index.get("envs", {}).values() if e.get("status") == "ok"}
    groups: dict[str, tuple] = {}  # spec name -> (spec, env manifest, repo key, repo manifest, records)
    results: dict[str, dict] = {}
    for rec in ing.records:
        try:
            spec = spec_for(catalog, rec)
        except KeyError as exc:
            results[rec.instance_id] = {"status": "env-broken", "reason": f"no environment spec: {exc}"}
            continue
        env = envs.get(spec.name)
        rkey = repo_key(spec.source, task_commit(spec, rec))
        repo = (index.get("repos", {}).get(rkey) or {})
        if env is None or repo.get("status") != "ok":
            what = f"environment of spec {spec.name}" if env is None else f"repo snapshot {rkey}"
            results[rec.instance_id] = {"status": "env-broken", "reason": f"{store.url} has no published {what}: "
                                        f"build it (snakemake --config label=true tasks=...)"}
            continue
        groups.setdefault(spec.name, (spec, env["manifest"], rkey, repo["manifest"], []))[4].append(rec)
    out_dir = Path(a.out).parent
    for name, (spec, env_m, rkey, repo_m, recs) in groups.items():
        ex = LayerExecutor(store=store.url, env_manifest=env_m, repo_manifests={rkey: repo_m},
                           repo_key_of={r.instance_id: rkey for r in recs})
        res = label_env(env_m.get("key", name), spec, recs, ex, repeats=a.repeats, workers=a.workers,
                        max_f2p=a.max_f2p, log_dir=Path(a.logs) / name)
        write_result(res, out_dir / "labels" / f"{env_m.get('key', name)}.json")
        results.update(res.tasks)
        print(f"{name}: {len(recs)} candidate(s) in {res.seconds:.1f} s: "
              + ", ".join(f"{k} {v}" for k, v in res.counts().items() if v), file=sys.stderr)
    doc = write_labelled(ing.records, results, Path(a.out), Path(a.report))
    for iid, d in doc["dropped"].items():
        print(f"DROPPED {iid}: {d['status']}: {d['reason']}", file=sys.stderr)
    print(f"{doc['labelled']} of {doc['candidates']} candidate(s) labelled: {a.out} (report: {a.report})")
    return 0


# ----------------------------------------------------------------------------- parser
def _step(steps, name: str, help_text: str, func) -> argparse.ArgumentParser:
    p = steps.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(func=func)
    return p


def register(sub) -> None:
    p = sub.add_parser("plan", help="Expand task files into the unique repos and environments to build.",
                       description="Read task files and catalogs, match every task to its environment spec "
                                   "and write the plan (unique sources, repo snapshots, environments); prints "
                                   "the counts, and one INVALID line per invalid record on stderr. Exits 1 when "
                                   "no task is usable.")
    p.add_argument("--tasks", nargs="+", required=True, help="task files (JSONL/JSON/Parquet)")
    p.add_argument("--catalog", nargs="+", required=True, help="environment catalogs (config/catalog/*.yaml)")
    p.add_argument("--plan-dir", default="results/work/plan", help="where plans are cached (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the counts and the invalid records as JSON")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("label", help="Compute FAIL_TO_PASS/PASS_TO_PASS of candidate bugs (SWE-smith records).",
                       description="Label a handful of candidate bugs as SWE-smith does, in sandboxes over a "
                                   "published store's environments: the whole suite with the fixed code (once per "
                                   "environment) and with each bug; FAIL_TO_PASS = passed fixed and failed or "
                                   "missing with the bug, PASS_TO_PASS = passed in both; flaky tests left out. "
                                   "Writes the labelled records (SWE-smith JSONL) and a report of the dropped "
                                   "ones. For many candidates run the workflow with --config label=true "
                                   "(docs/labelling.md).")
    p.add_argument("--tasks", nargs="+", required=True, help="candidate records (JSONL/JSON/Parquet): instance_id, "
                                                             "repo, patch (the bug); lists absent or empty")
    p.add_argument("--store", help="published store URL (default: $MINISANDBOX_STORE or the default config's)")
    p.add_argument("--catalog", nargs="+", help="environment catalogs (default: those config/config.yaml names)")
    p.add_argument("--out", default="results/label/labelled_tasks.jsonl",
                   help="labelled records to write (default: %(default)s)")
    p.add_argument("--report", default="results/label/report.json",
                   help="report to write: counts, dropped candidates and why (default: %(default)s)")
    p.add_argument("--logs", default="results/label/logs", help="run logs (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each suite; >1 finds flaky tests (default: 1)")
    p.add_argument("--max-f2p", type=int, default=0,
                   help="drop candidates with more FAIL_TO_PASS tests, over-broad bugs (default: 0, no limit)")
    p.add_argument("--workers", type=int, default=2, help="concurrent runs (default: %(default)s)")
    p.set_defaults(func=cmd_label)

    g = sub.add_parser("pipeline", help="Internal steps of the build workflow (called by the Snakemake rules).",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = g.add_subparsers(dest="step", required=True, metavar="STEP")

    s = _step(steps, "bundled", "Create the bundled task set's git repositories locally.", cmd_bundled)
    s.add_argument("--dest", required=True, help="directory for the repositories")
    s.add_argument("--done", required=True, help="marker file listing the repositories")

    s = _step(steps, "mirror", "Clone or update the bare mirror of one source.", cmd_mirror)
    s.add_argument("--spec", required=True, help="source spec JSON from the plan")
    s.add_argument("--mirror", required=True, help="bare mirror directory")
    s.add_argument("--status", required=True, help="status file to write")
    s.add_argument("--log", required=True, help="log file")

    s = _step(steps, "snapshot", "Write a commit's tree as a fresh single-commit repository.", cmd_snapshot)
    s.add_argument("--spec", required=True, help="repo spec JSON from the plan")
    s.add_argument("--mirror", required=True, help="bare mirror directory")
    s.add_argument("--mirror-status", required=True, help="status file of the mirror step")
    s.add_argument("--out", required=True, help="snapshot directory")
    s.add_argument("--status", required=True, help="status file to write")

    s = _step(steps, "resolve", "Resolve an environment's dependencies to a pinned lock.", cmd_resolve)
    s.add_argument("--spec", required=True, help="env spec JSON from the plan")
    s.add_argument("--repo", required=True, help="repo snapshot directory")
    s.add_argument("--repo-status", required=True, help="status file of the snapshot step")
    s.add_argument("--out", required=True, help="lock status file to write")
    s.add_argument("--log", required=True, help="log file")

    s = _step(steps, "build", "Build an environment's venv at the canonical path.", cmd_build)
    s.add_argument("--spec", required=True, help="env spec JSON from the plan")
    s.add_argument("--lock", required=True, help="lock status file of the resolve step")
    s.add_argument("--repo", required=True, help="repo snapshot directory")
    s.add_argument("--out", required=True, help="built tree directory")
    s.add_argument("--status", required=True, help="status file to write")
    s.add_argument("--log", required=True, help="log file")
    s.add_argument("--timeout", type=float, default=1800, help="seconds before the build is killed (default: %(default)s)")

    s = _step(steps, "pack", "Pack a tree into a deterministic archive.", cmd_pack)
    s.add_argument("--key", required=True, help="env or repo key")
    s.add_argument("--tree", required=True, help="directory to pack")
    s.add_argument("--upstream", required=True, help="status file of the step that made the tree")
    s.add_argument("--out", required=True, help="archive to write")
    s.add_argument("--status", required=True, help="status file to write")
    s.add_argument("--format", default="tar.zst", choices=["tar.zst", "tar.gz"], help="archive format (default: %(default)s)")
    s.add_argument("--level", type=int, default=3, help="compression level (default: %(default)s)")
    s.add_argument("--image", action="store_true", help="also build a squashfs image (root nodes mount it)")
    s.add_argument("--no-archive", action="store_true", help=NO_ARCHIVE_HELP)

    s = _step(steps, "checksum", "Digest an archive and write its manifest.", cmd_checksum)
    s.add_argument("--kind", required=True, choices=["env", "repo"], help="artifact kind")
    s.add_argument("--spec", required=True, help="env or repo spec JSON from the plan")
    s.add_argument("--archive", required=True, help="archive to digest")
    s.add_argument("--pack-status", required=True, help="status file of the pack step")
    s.add_argument("--upstream", required=True, help="status file of the build or snapshot step")
    s.add_argument("--out", required=True, help="manifest status file to write")

    s = _step(steps, "publish", "Upload an archive and its manifest (atomically) to a store.", cmd_publish)
    s.add_argument("--store", required=True, help="store URL")
    s.add_argument("--kind", required=True, choices=["env", "repo"], help="artifact kind")
    s.add_argument("--key", required=True, help="env or repo key")
    s.add_argument("--manifest", required=True, help="manifest status file of the checksum step")
    s.add_argument("--archive", required=True, help="archive to upload")
    s.add_argument("--log", default=None, help="build log to publish with it")
    s.add_argument("--out", required=True, help="publish receipt to write")
    s.add_argument("--image-whole", action="store_true", help=IMAGE_WHOLE_HELP)

    for name, what in (("repo", "mirror (once per source), snapshot, pack, checksum and publish one repository "
                                "snapshot (the workflow job of a repo key that several environments or tasks use)"),
                       ("env", "the workflow job of one env key: the repo snapshot it is built at when nothing else "
                               "uses it, then resolve, build, pack, checksum and publish the environment (reused "
                               "when only its validation inputs changed), then validate its tasks")):
        s = _step(steps, name, what[0].upper() + what[1:] + ".", cmd_repo if name == "repo" else cmd_env)
        s.add_argument("--work", required=True, help="the workflow's work dir (status files, trees, archives)")
        s.add_argument("--store", required=True, help="store URL")
        s.add_argument("--spec", required=True, help=f"{name} spec JSON from the plan")
        if name == "env":
            s.add_argument("--plan", required=True, help="the current plan JSON (folded repos, tasks to validate)")
            s.add_argument("--timeout", type=float, default=1800, help="build timeout in seconds (default: %(default)s)")
            s.add_argument("--validate", action="store_true", help="validate the environment's tasks after the build")
            s.add_argument("--validation", required=True,
                           help="validation JSON to write (`validated: false` without --validate)")
            s.add_argument("--label", action="store_true",
                           help="label the environment's candidates instead (docs/labelling.md); --validation "
                                "is then the labelling JSON to write")
            s.add_argument("--max-f2p", type=int, default=0,
                           help="with --label: drop candidates with more FAIL_TO_PASS tests (0: no limit)")
            s.add_argument("--repeats", type=int, default=1, help="validation runs per phase; >1 detects flaky tests")
            s.add_argument("--workers", type=int, default=2, help="concurrent task validations (default: %(default)s)")
        s.add_argument("--format", default="tar.zst", choices=["tar.zst", "tar.gz"], help="archive format (default: %(default)s)")
        s.add_argument("--level", type=int, default=3, help="compression level (default: %(default)s)")
        s.add_argument("--image", action="store_true", help="also build a squashfs image (nodes mount it)")
        s.add_argument("--image-whole", action="store_true", help=IMAGE_WHOLE_HELP)
        s.add_argument("--no-archive", action="store_true", help=NO_ARCHIVE_HELP)
        s.add_argument("--out", required=True, help="publish receipt to write")

    s = _step(steps, "interp", "Pack and publish an interpreter layer (once per interpreter build).", cmd_interp)
    s.add_argument("--spec", required=True, help="interpreter spec JSON from the plan")
    s.add_argument("--store", required=True, help="store URL")
    s.add_argument("--work", required=True, help="scratch directory for the archive")
    s.add_argument("--out", required=True, help="receipt to write")
    s.add_argument("--format", default="tar.zst", choices=["tar.zst", "tar.gz"], help="archive format (default: %(default)s)")
    s.add_argument("--level", type=int, default=3, help="compression level (default: %(default)s)")

    s = _step(steps, "validate", "Validate one environment's tasks (gold patch passes, no patch fails).",
              cmd_validate)
    s.description = ("For every task of one environment: without a patch F2P fails and P2P passes; with the "
                     "gold patch all pass. Writes the per-task statuses (valid, env-broken, flaky, timeout) "
                     "as JSON plus run logs.")
    s.add_argument("--plan", required=True, help="plan JSON")
    s.add_argument("--env-key", required=True, help="the environment to validate")
    s.add_argument("--receipts", required=True, help="publish receipts dir (holds env/ and repo/)")
    s.add_argument("--store", required=True, help="store URL")
    s.add_argument("--out", required=True, help="validation JSON to write")
    s.add_argument("--logs", required=True, help="directory for run logs")
    s.add_argument("--repeats", type=int, default=1, help="runs per phase; >1 detects flaky tests")
    s.add_argument("--workers", type=int, default=2, help="concurrent validations (default: %(default)s)")

    s = _step(steps, "validated-tasks", "Write the tasks whose validation status is valid.", cmd_validated_tasks)
    s.add_argument("--validation", nargs="*", default=[], help="validation JSON files")
    s.add_argument("--validation-dir", help="directory with one validation JSON per planned environment (needs --plan)")
    s.add_argument("--plan", help="plan JSON (which environments --validation-dir holds)")
    s.add_argument("--tasks", required=True, help="the plan's tasks.jsonl")
    s.add_argument("--out", required=True, help="task file (JSONL) to write")

    s = _step(steps, "labelled-tasks", "Write the labelled candidates (label mode) and the labelling report.",
              cmd_labelled_tasks)
    s.add_argument("--plan", required=True, help="plan JSON (which environments --labels-dir holds)")
    s.add_argument("--labels-dir", required=True, help="directory with one labelling JSON per planned environment")
    s.add_argument("--tasks", required=True, help="the plan's tasks.jsonl")
    s.add_argument("--out", required=True, help="task file (JSONL, SWE-smith records) to write")
    s.add_argument("--report", required=True, help="report JSON to write (counts, dropped candidates and why)")

    s = _step(steps, "index", "Write the store's index (all tasks -> artifacts) and the run report.", cmd_index)
    s.add_argument("--store", required=True, help="store URL")
    s.add_argument("--plan", required=True, help="plan JSON")
    s.add_argument("--receipts", required=True, help="publish receipts dir")
    s.add_argument("--validation", nargs="*", default=[], help="validation JSON files")
    s.add_argument("--validation-dir", help="directory with one validation JSON per planned environment")
    s.add_argument("--out", required=True, help="index receipt to write")
    s.add_argument("--report", required=True, help="run report JSON to write (and .txt next to it)")
