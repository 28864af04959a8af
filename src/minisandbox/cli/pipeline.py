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
def cmd_plan(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.plan import PlanError, format_invalid, invalid_summary, load_or_build_plan

    plan = load_or_build_plan(args.tasks, args.catalog, Path.cwd(), Path(args.plan_dir))
    for rec in plan.invalid:  # stderr: stdout stays the result alone (JSON with --json)
        print(f"INVALID {format_invalid(rec)}", file=sys.stderr)
    counts = {
        "tasks": plan.n_tasks,
        "envs": len(plan.envs),
        "repos": len(plan.repos),
        "sources": len(plan.sources),
        "invalid": len(plan.invalid),
    }
    if args.json:
        print(json.dumps({**counts, "invalid_records": plan.invalid}, indent=1))
    else:
        print(
            f"{counts['tasks']} tasks -> {counts['envs']} environments, {counts['repos']} repo snapshots "
            f"from {counts['sources']} sources; {counts['invalid']} invalid records"
        )
    _, fatal = invalid_summary(plan)
    if fatal:
        raise PlanError(fatal)
    return 0


# ----------------------------------------------------------------------------- steps
# Each step returns 0 when it recorded its result (ok or failed) in its status file.


def cmd_bundled(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.bundled import materialize

    repos = materialize(Path(args.dest))
    atomic_write_text(args.done, json.dumps({k: str(v) for k, v in sorted(repos.items())}, indent=1) + "\n")
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_mirror

    step_mirror(Path(args.spec), Path(args.mirror), Path(args.status), Path(args.log))
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_snapshot

    step_snapshot(Path(args.spec), Path(args.mirror), Path(args.mirror_status), Path(args.out), Path(args.status))
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_resolve

    step_resolve(Path(args.spec), Path(args.repo), Path(args.repo_status), Path(args.out), Path(args.log))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_build

    step_build(
        Path(args.spec),
        Path(args.lock),
        Path(args.repo),
        Path(args.out),
        Path(args.status),
        Path(args.log),
        args.timeout,
    )
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_pack

    step_pack(
        args.key,
        Path(args.tree),
        Path(args.upstream),
        Path(args.out),
        Path(args.status),
        args.format,
        args.level,
        image=args.image,
        with_archive=not args.no_archive,
    )
    return 0


def cmd_checksum(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_checksum

    step_checksum(
        args.kind, Path(args.spec), Path(args.archive), Path(args.pack_status), Path(args.upstream), Path(args.out)
    )
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import step_publish

    step_publish(
        args.store,
        args.kind,
        args.key,
        Path(args.manifest),
        Path(args.archive),
        Path(args.log) if args.log else None,
        Path(args.out),
        image_whole=args.image_whole,
    )
    return 0


NO_ARCHIVE_HELP = (
    "with --image, publish no tar archive: the store serves the layer as the image's chunks "
    "only (config archive: false)"
)
IMAGE_WHOLE_HELP = (
    "also upload each image as one file (by default only its chunks and chunk list, from which "
    "nodes assemble it: config image_whole)"
)


def _summary(st) -> str:
    return f"{st.key}: {'ok' if st.ok else 'FAILED ' + (st.error or '')}"


def cmd_repo(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import job_repo

    sid = json.loads(Path(args.spec).read_text())["source_id"]
    source_spec = Path(args.work) / "specs" / "source" / f"{sid}.json"  # written at planning time
    st = job_repo(
        Path(args.work),
        args.store,
        Path(args.spec),
        source_spec,
        args.format,
        args.level,
        args.image,
        Path(args.out),
        image_whole=args.image_whole,
        with_archive=not args.no_archive,
    )
    print(f"repo {_summary(st)}")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    """The workflow's job for one environment (`minisandbox.workflowjobs.env_job`): its own
    repo snapshot when nothing else uses it, the build and publish (reused when only
    validation inputs changed), then the validation (or labelling) of its tasks."""
    from minisandbox.workflowjobs import EnvJobRequest, EnvJobSettings, env_job

    work = Path(args.work)
    spec, out, result = _env_job_paths(args, work)
    settings = EnvJobSettings(
        store=args.store,
        fmt=args.format,
        level=args.level,
        image=args.image,
        image_whole=args.image_whole,
        timeout=args.timeout,
        archive=not args.no_archive,
    )
    job = EnvJobRequest(
        work=work,
        spec=spec,
        plan=Path(args.plan),
        receipt=out,
        output=result,
        validate=args.validate,
        label=args.label,
        repeats=args.repeats,
        workers=args.workers,
        max_f2p=args.max_f2p,
        resume_passes=args.resume_passes,
    )
    for line in env_job(settings, job).lines:
        print(line)
    return 0


def _env_job_paths(args: argparse.Namespace, work: Path) -> tuple[Path, Path, Path]:
    """The env job's spec, receipt and result paths: given one by one, or from `--key` in
    the workflow's layout (the rule passes only the key: every placeholder of a shell
    command costs Snakemake's planning per job, docs/pipeline.md "Numbers")."""
    from minisandbox.errors import MinisandboxError

    key = args.key
    if key is not None and ("/" in key or not key.startswith("env-")):
        raise MinisandboxError(f"--key {key!r} is not an env key (env-...)")
    given = {"--spec": args.spec, "--out": args.out, "--validation": args.validation}
    if key is None and None in given.values():
        missing = ", ".join(k for k, v in given.items() if v is None)
        raise MinisandboxError(f"pipeline env needs --key or {missing}")
    result_dir = "labels" if args.label else "validation"
    return (
        Path(args.spec) if args.spec else work / "specs" / "env" / f"{key}.json",
        Path(args.out) if args.out else work / "published" / "env" / f"{key}.json",
        Path(args.validation) if args.validation else work / result_dir / f"{key}.json",
    )


def cmd_interp(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.interplayer import step_interp

    st = step_interp(Path(args.spec), args.store, Path(args.work), Path(args.out), args.format, args.level)
    print(f"interpreter layer {st.key}: " + ("published" if st.ok else st.error))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from minisandbox.grading.validate import step_validate

    res = step_validate(
        Path(args.plan),
        args.env_key,
        Path(args.receipts),
        args.store,
        Path(args.out),
        Path(args.logs),
        repeats=args.repeats,
        workers=args.workers,
    )
    counts = res.counts()
    print(
        f"validated {len(res.tasks)} task(s) of {args.env_key} in {res.seconds:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    return 0


def _validation_files(args: argparse.Namespace) -> list[Path]:
    """`--validation FILE...` plus, with `--validation-dir`, every planned environment's
    result in it (the workflow passes the directory: one file per env job)."""
    from minisandbox.errors import MinisandboxError

    files = [Path(v) for v in args.validation]
    if args.validation_dir:
        if not args.plan:
            raise MinisandboxError("--validation-dir needs --plan (which environments to read)")
        envs = json.loads(Path(args.plan).read_text())["envs"]
        files += [Path(args.validation_dir) / f"{k}.json" for k in sorted(envs)]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise MinisandboxError(
            f"validation result {missing[0]} does not exist ({len(missing)} missing); "
            f"its env job writes it: rerun the workflow"
        )
    return files


def cmd_validated_tasks(args: argparse.Namespace) -> int:
    from minisandbox.grading.validate import validated_ids
    from minisandbox.records import TaskRecord, to_raw

    valid = set(validated_ids(_validation_files(args)))
    lines = []
    with open(args.tasks, encoding="utf-8") as src:
        for line in src:
            t = json.loads(line)
            if t.get("instance_id") in valid:
                lines.append(json.dumps(to_raw(TaskRecord.from_dict(t["record"])), ensure_ascii=False) + "\n")
    atomic_write_text(args.out, "".join(lines))
    print(f"{len(lines)} valid task(s) written to {args.out}")
    return 0


def cmd_labelled_tasks(args: argparse.Namespace) -> int:
    """Label mode's last step: the labelled candidates as SWE-smith records, and a report
    naming every dropped candidate with its status and reason."""
    from minisandbox.errors import MinisandboxError
    from minisandbox.grading.label import read_results, write_labelled
    from minisandbox.records import TaskRecord

    plan = json.loads(Path(args.plan).read_text())
    files = [Path(args.labels_dir) / f"{k}.json" for k in sorted(plan.get("envs", {}))]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise MinisandboxError(
            f"labelling result {missing[0]} does not exist ({len(missing)} missing); "
            f"run the workflow with --config label=true"
        )
    with open(args.tasks, encoding="utf-8") as src:
        records = [TaskRecord.from_dict(json.loads(line)["record"]) for line in src if line.strip()]
    doc = write_labelled(records, read_results(files), Path(args.out), Path(args.report))
    print(
        f"{doc['labelled']} of {doc['candidates']} candidate(s) labelled, written to {args.out}; "
        + ", ".join(f"{k} {v}" for k, v in doc["counts"].items() if v)
        + f" (dropped ones in {args.report})"
    )
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from minisandbox.pipeline.steps import format_report, step_index

    report = step_index(
        args.store, Path(args.plan), Path(args.receipts), _validation_files(args), Path(args.out), Path(args.report)
    )
    text = format_report(report)
    atomic_write_text(Path(args.report).with_suffix(".txt"), text + "\n")
    print(text)
    return 0


# ----------------------------------------------------------------------------- label
def cmd_label(args: argparse.Namespace) -> int:
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

    ing = read_tasks(args.tasks, label=True)
    for bad in ing.invalid:
        print(f"minisandbox label: skipping invalid record {bad}", file=sys.stderr)
    if not ing.records:
        raise MinisandboxError(
            f"no labelling candidate in {' '.join(args.tasks)}: SWE-smith records with `instance_id`, "
            f"`repo` (swesmith/<profile>) and `patch` (the bug) are needed"
        )
    catalogs = args.catalog or default_catalog_paths()
    if not catalogs:
        raise CatalogError("no environment catalog found; pass --catalog config/catalog/<name>.yaml")
    catalog = Catalog.load(catalogs)
    store = open_store(args.store)
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
        repo = index.get("repos", {}).get(rkey) or {}
        if env is None or repo.get("status") != "ok":
            what = f"environment of spec {spec.name}" if env is None else f"repo snapshot {rkey}"
            results[rec.instance_id] = {
                "status": "env-broken",
                "reason": f"{store.url} has no published {what}: build it (snakemake --config label=true tasks=...)",
            }
            continue
        groups.setdefault(spec.name, (spec, env["manifest"], rkey, repo["manifest"], []))[4].append(rec)
    out_dir = Path(args.out).parent
    for name, (spec, env_m, rkey, repo_m, recs) in groups.items():
        ex = LayerExecutor(
            store=store.url,
            env_manifest=env_m,
            repo_manifests={rkey: repo_m},
            repo_key_of={r.instance_id: rkey for r in recs},
        )
        res = label_env(
            env_m.get("key", name),
            spec,
            recs,
            ex,
            repeats=args.repeats,
            workers=args.workers,
            max_f2p=args.max_f2p,
            passes=args.resume_passes,
            log_dir=Path(args.logs) / name,
        )
        write_result(res, out_dir / "labels" / f"{env_m.get('key', name)}.json")
        results.update(res.tasks)
        print(
            f"{name}: {len(recs)} candidate(s) in {res.seconds:.1f} s: "
            + ", ".join(f"{k} {v}" for k, v in res.counts().items() if v),
            file=sys.stderr,
        )
    doc = write_labelled(ing.records, results, Path(args.out), Path(args.report))
    for iid, d in doc["dropped"].items():
        print(f"DROPPED {iid}: {d['status']}: {d['reason']}", file=sys.stderr)
    print(f"{doc['labelled']} of {doc['candidates']} candidate(s) labelled: {args.out} (report: {args.report})")
    return 0


# ----------------------------------------------------------------------------- parser
def _step(steps, name: str, help_text: str, func) -> argparse.ArgumentParser:
    p = steps.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(func=func)
    return p


def _required(parser: argparse.ArgumentParser, **helps: str) -> None:
    """One required `--name` per keyword (`mirror_status` -> `--mirror-status`), in order."""
    for name, help_text in helps.items():
        parser.add_argument("--" + name.replace("_", "-"), required=True, help=help_text)


def _archive_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", default="tar.zst", choices=["tar.zst", "tar.gz"], help="archive format (default: %(default)s)"
    )
    parser.add_argument("--level", type=int, default=3, help="compression level (default: %(default)s)")


def register(sub) -> None:
    _register_plan(sub)
    _register_label(sub)
    steps = sub.add_parser(
        "pipeline",
        help="Internal steps of the build workflow (called by the Snakemake rules).",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = steps.add_subparsers(dest="step", required=True, metavar="STEP")
    _register_build_steps(steps)
    _register_jobs(steps)
    _register_result_steps(steps)


def _register_plan(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="Expand task files into the unique repos and environments to build.",
        description="Read task files and catalogs, match every task to its environment spec "
        "and write the plan (unique sources, repo snapshots, environments); prints "
        "the counts, and one INVALID line per invalid record on stderr. Exits 1 when "
        "no task is usable.",
    )
    p.add_argument("--tasks", nargs="+", required=True, help="task files (JSONL/JSON/Parquet)")
    p.add_argument("--catalog", nargs="+", required=True, help="environment catalogs (config/catalog/*.yaml)")
    p.add_argument("--plan-dir", default="results/work/plan", help="where plans are cached (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the counts and the invalid records as JSON")
    p.set_defaults(func=cmd_plan)


def _register_label(sub) -> None:
    p = sub.add_parser(
        "label",
        help="Compute FAIL_TO_PASS/PASS_TO_PASS of candidate bugs (SWE-smith records).",
        description="Label a handful of candidate bugs as SWE-smith does, in sandboxes over a "
        "published store's environments: the whole suite with the fixed code (once per "
        "environment) and with each bug; FAIL_TO_PASS = passed fixed and failed or "
        "missing with the bug, PASS_TO_PASS = passed in both; flaky tests left out. "
        "Writes the labelled records (SWE-smith JSONL) and a report of the dropped "
        "ones. For many candidates run the workflow with --config label=true "
        "(docs/labelling.md).",
    )
    p.add_argument(
        "--tasks",
        nargs="+",
        required=True,
        help="candidate records (JSONL/JSON/Parquet): instance_id, repo, patch (the bug); lists absent or empty",
    )
    p.add_argument("--store", help="published store URL (default: $MINISANDBOX_STORE or the default config's)")
    p.add_argument("--catalog", nargs="+", help="environment catalogs (default: those config/config.yaml names)")
    p.add_argument(
        "--out", default="results/label/labelled_tasks.jsonl", help="labelled records to write (default: %(default)s)"
    )
    p.add_argument(
        "--report",
        default="results/label/report.json",
        help="report to write: counts, dropped candidates and why (default: %(default)s)",
    )
    p.add_argument("--logs", default="results/label/logs", help="run logs (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each suite; >1 finds flaky tests (default: 1)")
    p.add_argument(
        "--max-f2p",
        type=int,
        default=0,
        help="drop candidates with more FAIL_TO_PASS tests, over-broad bugs (default: 0, no limit)",
    )
    p.add_argument(
        "--resume-passes",
        type=int,
        default=2,
        help="bug runs again over the tests a killed bug run never reached (default: %(default)s; "
        "0: SWE-smith's labels, every unreached test FAIL_TO_PASS)",
    )
    p.add_argument("--workers", type=int, default=2, help="concurrent runs (default: %(default)s)")
    p.set_defaults(func=cmd_label)


def _register_build_steps(steps) -> None:
    """The single steps of a build, one per former rule (kept for debugging a job)."""
    s = _step(steps, "bundled", "Create the bundled task set's git repositories locally.", cmd_bundled)
    _required(s, dest="directory for the repositories", done="marker file listing the repositories")
    s = _step(steps, "mirror", "Clone or update the bare mirror of one source.", cmd_mirror)
    _required(
        s,
        spec="source spec JSON from the plan",
        mirror="bare mirror directory",
        status="status file to write",
        log="log file",
    )
    s = _step(steps, "snapshot", "Write a commit's tree as a fresh single-commit repository.", cmd_snapshot)
    _required(
        s,
        spec="repo spec JSON from the plan",
        mirror="bare mirror directory",
        mirror_status="status file of the mirror step",
        out="snapshot directory",
        status="status file to write",
    )
    s = _step(steps, "resolve", "Resolve an environment's dependencies to a pinned lock.", cmd_resolve)
    _required(
        s,
        spec="env spec JSON from the plan",
        repo="repo snapshot directory",
        repo_status="status file of the snapshot step",
        out="lock status file to write",
        log="log file",
    )
    s = _step(steps, "build", "Build an environment's venv at the canonical path.", cmd_build)
    _required(
        s,
        spec="env spec JSON from the plan",
        lock="lock status file of the resolve step",
        repo="repo snapshot directory",
        out="built tree directory",
        status="status file to write",
        log="log file",
    )
    s.add_argument(
        "--timeout", type=float, default=1800, help="seconds before the build is killed (default: %(default)s)"
    )
    s = _step(steps, "pack", "Pack a tree into a deterministic archive.", cmd_pack)
    _required(
        s,
        key="env or repo key",
        tree="directory to pack",
        upstream="status file of the step that made the tree",
        out="archive to write",
        status="status file to write",
    )
    _archive_options(s)
    s.add_argument("--image", action="store_true", help="also build a squashfs image (root nodes mount it)")
    s.add_argument("--no-archive", action="store_true", help=NO_ARCHIVE_HELP)
    s = _step(steps, "checksum", "Digest an archive and write its manifest.", cmd_checksum)
    s.add_argument("--kind", required=True, choices=["env", "repo"], help="artifact kind")
    _required(
        s,
        spec="env or repo spec JSON from the plan",
        archive="archive to digest",
        pack_status="status file of the pack step",
        upstream="status file of the build or snapshot step",
        out="manifest status file to write",
    )
    s = _step(steps, "publish", "Upload an archive and its manifest (atomically) to a store.", cmd_publish)
    s.add_argument("--store", required=True, help="store URL")
    s.add_argument("--kind", required=True, choices=["env", "repo"], help="artifact kind")
    _required(
        s, key="env or repo key", manifest="manifest status file of the checksum step", archive="archive to upload"
    )
    s.add_argument("--log", default=None, help="build log to publish with it")
    s.add_argument("--out", required=True, help="publish receipt to write")
    s.add_argument("--image-whole", action="store_true", help=IMAGE_WHOLE_HELP)


_JOBS = {
    "repo": (
        "mirror (once per source), snapshot, pack, checksum and publish one repository snapshot (the workflow "
        "job of a repo key that several environments or tasks use)",
        cmd_repo,
    ),
    "env": (
        "the workflow job of one env key: the repo snapshot it is built at when nothing else uses it, then "
        "resolve, build, pack, checksum and publish the environment (reused when only its validation inputs "
        "changed), then validate its tasks",
        cmd_env,
    ),
}


def _register_jobs(steps) -> None:
    """The workflow's jobs: one per repo key used more than once, one per env key, one per
    interpreter build."""
    for name, (what, func) in _JOBS.items():
        s = _step(steps, name, what[0].upper() + what[1:] + ".", func)
        _required(s, work="the workflow's work dir (status files, trees, archives)", store="store URL")
        if name == "env":
            _env_job_options(s)
        else:
            _required(s, spec=f"{name} spec JSON from the plan")
        _archive_options(s)
        s.add_argument("--image", action="store_true", help="also build a squashfs image (nodes mount it)")
        s.add_argument("--image-whole", action="store_true", help=IMAGE_WHOLE_HELP)
        s.add_argument("--no-archive", action="store_true", help=NO_ARCHIVE_HELP)
        if name != "env":
            s.add_argument("--out", required=True, help="publish receipt to write")
    s = _step(steps, "interp", "Pack and publish an interpreter layer (once per interpreter build).", cmd_interp)
    _required(
        s,
        spec="interpreter spec JSON from the plan",
        store="store URL",
        work="scratch directory for the archive",
        out="receipt to write",
    )
    _archive_options(s)


def _env_job_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--key",
        help="the env key: the paths below default to the workflow's layout under --work "
        "(specs/env/KEY.json, published/env/KEY.json, validation/KEY.json or with --label labels/KEY.json)",
    )
    s.add_argument("--spec", help="env spec JSON from the plan (needed without --key)")
    s.add_argument("--out", help="publish receipt to write (needed without --key)")
    s.add_argument("--plan", required=True, help="the current plan JSON (folded repos, tasks to validate)")
    s.add_argument("--timeout", type=float, default=1800, help="build timeout in seconds (default: %(default)s)")
    s.add_argument("--validate", action="store_true", help="validate the environment's tasks after the build")
    s.add_argument(
        "--validation", help="validation JSON to write (`validated: false` without --validate; needed without --key)"
    )
    s.add_argument(
        "--label",
        action="store_true",
        help="label the environment's candidates instead (docs/labelling.md); --validation "
        "is then the labelling JSON to write",
    )
    s.add_argument(
        "--max-f2p",
        type=int,
        default=0,
        help="with --label: drop candidates with more FAIL_TO_PASS tests (0: no limit)",
    )
    s.add_argument(
        "--resume-passes",
        type=int,
        default=2,
        help="with --label: bug runs again over the tests a killed bug run never reached (0: none)",
    )
    s.add_argument("--repeats", type=int, default=1, help="validation runs per phase; >1 detects flaky tests")
    s.add_argument("--workers", type=int, default=2, help="concurrent task validations (default: %(default)s)")


def _register_result_steps(steps) -> None:
    """What follows the builds: validation, the task files of valid or labelled tasks, the index."""
    s = _step(steps, "validate", "Validate one environment's tasks (gold patch passes, no patch fails).", cmd_validate)
    s.description = (
        "For every task of one environment: without a patch F2P fails and P2P passes; with the "
        "gold patch all pass. Writes the per-task statuses (valid, env-broken, flaky, timeout) "
        "as JSON plus run logs."
    )
    _required(
        s,
        plan="plan JSON",
        env_key="the environment to validate",
        receipts="publish receipts dir (holds env/ and repo/)",
        store="store URL",
        out="validation JSON to write",
        logs="directory for run logs",
    )
    s.add_argument("--repeats", type=int, default=1, help="runs per phase; >1 detects flaky tests")
    s.add_argument("--workers", type=int, default=2, help="concurrent validations (default: %(default)s)")

    s = _step(steps, "validated-tasks", "Write the tasks whose validation status is valid.", cmd_validated_tasks)
    s.add_argument("--validation", nargs="*", default=[], help="validation JSON files")
    s.add_argument("--validation-dir", help="directory with one validation JSON per planned environment (needs --plan)")
    s.add_argument("--plan", help="plan JSON (which environments --validation-dir holds)")
    _required(s, tasks="the plan's tasks.jsonl", out="task file (JSONL) to write")

    s = _step(
        steps,
        "labelled-tasks",
        "Write the labelled candidates (label mode) and the labelling report.",
        cmd_labelled_tasks,
    )
    _required(
        s,
        plan="plan JSON (which environments --labels-dir holds)",
        labels_dir="directory with one labelling JSON per planned environment",
        tasks="the plan's tasks.jsonl",
        out="task file (JSONL, SWE-smith records) to write",
        report="report JSON to write (counts, dropped candidates and why)",
    )

    s = _step(steps, "index", "Write the store's index (all tasks -> artifacts) and the run report.", cmd_index)
    _required(s, store="store URL", plan="plan JSON", receipts="publish receipts dir")
    s.add_argument("--validation", nargs="*", default=[], help="validation JSON files")
    s.add_argument("--validation-dir", help="directory with one validation JSON per planned environment")
    _required(s, out="index receipt to write", report="run report JSON to write (and .txt next to it)")
