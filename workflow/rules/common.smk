# Config validation, planning (parse time) and every helper function of the rules (the
# rule files hold rules only). The plan is cached by its inputs' content, so every parse of
# a run (and of every cluster job) reads one small JSON. The plan cache and the per-key spec
# files (written only when missing or changed) are the only files written while parsing:
# the DAG is expanded over their keys. The bundled repos' directory is created by the
# `bundled` rule; planning only needs its (absolute) path.
#
# `snakemake --lint` leaves one finding on purpose, once for each rule ("Specify a conda
# environment or container for each rule"). Every rule runs this repository's `minisandbox`
# package, which the workflow itself imports while parsing (below), so it is installed
# wherever Snakemake runs (envs/minisandbox.yaml makes that environment); a per-rule conda
# env or container would add a second copy and nothing else. Task environments are uv venvs
# the workflow builds itself. tests/test_workflow_conventions.py allows exactly this finding.
import gc
import inspect
import sys
import tempfile
from pathlib import Path

from snakemake.common import overwrite_function_params
from snakemake.utils import validate

from minisandbox.errors import MinisandboxError
from minisandbox.pipeline.plan import (
    invalid_summary,
    load_or_build_plan,
    write_plan_files,
)


def _coerce_bools(
    cfg,
    keys=(
        "bundled",
        "validate",
        "images",
        "image_whole",
        "archive",
        "retry_failed",
        "label",
    ),
):
    """`--config validate=true` arrives as a string; the schema wants a boolean."""
    for k in keys:
        if isinstance(cfg.get(k), str) and cfg[k].lower() in (
            "true",
            "false",
            "1",
            "0",
            "yes",
            "no",
        ):
            cfg[k] = cfg[k].lower() in ("true", "1", "yes")


def _as_list(value):
    """`--config tasks=a.jsonl,b.jsonl` or a YAML list."""
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return list(value)


def _validate_config(cfg, schema_file):
    """The schema check, with one line per mistake: a misspelled key names itself and the
    closest known key, a bad value its key and what was wrong (Snakemake's own message
    prints the whole schema)."""
    import difflib

    import yaml
    from snakemake.exceptions import WorkflowError

    schema_path = Path(workflow.current_basedir) / schema_file
    known = sorted(yaml.safe_load(schema_path.read_text())["properties"])
    for key in cfg:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            sys.exit(
                f"minisandbox: config key {key!r} is not a workflow setting{hint} "
                "(every key: config/README.md)"
            )
    try:
        validate(cfg, schema_file)
    except WorkflowError as exc:
        err = exc.__context__  # the jsonschema error (raised while handling it)
        if not hasattr(err, "absolute_path"):
            raise
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        sys.exit(
            f"minisandbox: config {where}: {err.message} (every key: config/README.md)"
        )


# Snakemake builds a few hundred objects per job (5k env jobs: millions), and the cyclic
# garbage collector's youngest generation runs every 700 allocations, walking them again
# and again: a larger first threshold saves ~6% of a 50k-task / 5k-environment dry run's
# CPU (docs/pipeline.md, "Numbers"). Cycles are still collected, only less often.
gc.set_threshold(100_000, 20, 20)

_coerce_bools(config)
_validate_config(config, "../schemas/config.schema.yaml")

W = config["workdir"].rstrip("/")
# Label mode (docs/labelling.md): the task files hold candidates to label; each env job
# labels its candidates instead of validating them.
LABEL = config["label"]
VALIDATE = config["validate"] and not LABEL
STORE = config["store"]
FMT = config["format"]
TASK_FILES = _as_list(config["tasks"])
CATALOG_FILES = _as_list(config["catalog"])
BUNDLED_DIR = "results/bundled/repos"
BUNDLED_DONE = f"{BUNDLED_DIR}.json"

# Bad input stops the run with one line naming the file (and record, field), not a stack.
try:
    PLAN = load_or_build_plan(
        TASK_FILES, CATALOG_FILES, Path.cwd(), Path(f"{W}/plan"), label=LABEL
    )
except MinisandboxError as exc:
    sys.exit(f"minisandbox: {exc}")
_warning, _fatal = invalid_summary(PLAN)
if _fatal:
    sys.exit(f"minisandbox: {_fatal}")
if _warning and workflow.is_main_process:
    print(_warning, file=sys.stderr)

PLAN_FILE = str(Path(PLAN.tasks_file).with_name("plan.json"))
# Same content as PLAN_FILE at a path that never changes: the env rule takes it as a param,
# so adding tasks reruns only the jobs whose own inputs changed. Written with the per-key
# spec files, and only when the plan differs from the last one written there.
CURRENT_PLAN = f"{W}/plan/current.json"
write_plan_files(PLAN, Path(f"{W}/specs"), Path(CURRENT_PLAN))

ENV_KEYS = sorted(PLAN.envs)
INTERP_KEYS = sorted(PLAN.interps)
# Repos with a job of their own; every other repo is folded into the job of the one
# environment that uses it (Plan.folded: one job per SWE-smith environment, not two).
REPO_KEYS = PLAN.repo_jobs()
_BUNDLED_ABS = str(Path(BUNDLED_DIR).resolve())

# retry_failed: the jobs whose receipts record a failure run again (and what depends on
# them, which failed with them); what succeeded is left alone, and a plain rerun keeps
# recorded failures (docs/pipeline.md, "Failures"). The failed receipts are moved to
# {W}/failed/ (kept for reference) and the index receipt is removed, so those jobs' outputs
# are missing; this happens on the first run given the option, a dry run included.
if config.get("retry_failed") and workflow.is_main_process:
    from minisandbox.pipeline.steps import failed_receipts, set_aside

    _failed = failed_receipts(
        Path(f"{W}/published"),
        {"interp": INTERP_KEYS, "repo": REPO_KEYS, "env": ENV_KEYS},
    )
    set_aside(_failed, Path(f"{W}/failed"))
    # Snakemake leaves a missing intermediate alone while its consumer is done.
    if _failed:
        Path(f"{W}/index.json").unlink(missing_ok=True)
    print(
        f"minisandbox: retry_failed: {len(_failed)} failed key(s) to rebuild"
        + "".join(f"\n  {p}" for p in _failed[:20])
        + (f"\n  ... and {len(_failed) - 20} more" if len(_failed) > 20 else ""),
        file=sys.stderr,
    )


# ----------------------------------------------------------------- options and inputs
# Snakemake plans each job in ~1 ms of CPU, and every input function, param function and
# placeholder adds to it (docs/pipeline.md, "Numbers"): settings that are the same for
# every job are one static option string, per-key inputs are precomputed lists.
def _opts(*parts):
    return " ".join(str(p) for p in parts if p != "")


_PUBLISH_OPTS = _opts(
    f"--work {W} --store {STORE} --format {FMT} --level {config['zstd_level']}",
    "--image" if config["images"] else "",
    "--image-whole" if config["images"] and config["image_whole"] else "",
    "--no-archive" if config["images"] and not config["archive"] else "",
)
ENV_OPTS = _opts(
    _PUBLISH_OPTS,
    f"--timeout {config['build_timeout']} --plan {CURRENT_PLAN}",
    f"--validate --repeats {config['validate_repeats']}" if VALIDATE else "",
    (
        f"--label --repeats {config['validate_repeats']} --max-f2p {config['label_max_f2p']} "
        f"--resume-passes {config['label_resume_passes']}"
        if LABEL
        else ""
    ),
)


def _env_deps(key):
    """What one env job waits for: its interpreter layer, the repo job of the commit it is
    built at (unless that repo is folded into this job) and, with validation, the repo jobs
    of the commits its tasks start from (SWE-bench: several base commits)."""
    entry = PLAN.envs[key]
    ikey = (entry.get("interpreter") or {}).get("key")
    deps = [f"{W}/published/interp/{ikey}.json"] if ikey else []
    repos = {entry["repo_key"]} | (
        set(PLAN.env_repos.get(key, ())) if VALIDATE or LABEL else set()
    )
    deps += [
        f"{W}/published/repo/{r}.json" for r in sorted(repos) if r not in PLAN.folded
    ]
    return deps


ENV_DEPS = {k: _env_deps(k) for k in ENV_KEYS}
# The env job's one file input: with validation (or labelling) its task-set digest,
# rewritten only when the environment's tasks change, so exactly those jobs rerun (and
# revalidate, reusing their build); without, its spec. Both are written at parse time and
# the job finds its spec by its key: a second input costs ~400 Python calls per job.
ENV_INPUT = f"{W}/specs/{'env-tasks' if VALIDATE or LABEL else 'env'}/{{env_key}}.json"
# The env job's outputs, at the paths `minisandbox pipeline env --key` derives from --work.
ENV_RECEIPT = f"{W}/published/env/{{env_key}}.json"
ENV_RESULT = f"{W}/{'labels' if LABEL else 'validation'}/{{env_key}}.json"


def _literal(opts):
    """Settings as literal text of a shell command (a format string: braces doubled)
    instead of a `params` entry, ~100 Python calls per job less. Snakemake's code rerun
    trigger compares the command's text, so a changed setting still reruns the rule's jobs,
    as the params trigger did."""
    return opts.replace("{", "{{").replace("}", "}}")


ENV_SHELL = (
    f"minisandbox pipeline env {_literal(ENV_OPTS)}"
    " --workers {threads} --key {wildcards.env_key} > {log} 2>&1"
)
REPO_SHELL = (
    f"minisandbox pipeline repo {_literal(_PUBLISH_OPTS)}"
    " --spec {input.spec} --out {output.receipt} > {log} 2>&1"
)


def _job_tmpdir(given):
    """Snakemake's default `tmpdir` resource is the expression `system_tmpdir` (with or
    without --default-resources), compiled and evaluated for every job: ~5% of a
    5k-environment dry run's CPU (docs/pipeline.md, "Numbers"). The per-key rules give the
    same value as a constant: the temporary directory of the process that runs the job
    (TMPDIR, TEMP, TMP, else /tmp; every process, a cluster job's included, parses this file
    itself). A tmpdir the user set in --default-resources stands, and --set-resources
    RULE:tmpdir=... overrides either way."""
    try:
        default = None if given is None else given["tmpdir"].raw
    except (KeyError, TypeError, AttributeError):
        return {}  # a form of the setting not known here: Snakemake's own evaluation
    return (
        {"tmpdir": tempfile.gettempdir()} if default in (None, "system_tmpdir") else {}
    )


JOB_TMPDIR = _job_tmpdir(workflow.resource_settings.default_resources)


def env_deps(wc):
    """The env rule's per-key input, a dict lookup (ENV_DEPS)."""
    return ENV_DEPS[wc.env_key]


# Snakemake reads an input function's parameters with inspect.signature twice per job
# unless the function carries them (`overwrite_function_params`, as snakemake.ioutils
# does): ~75 Python calls per env job saved.
overwrite_function_params(env_deps, inspect.signature(env_deps).parameters)


def repo_bundled(wc):
    """Repos of bundled sources wait for the bundled repositories to exist."""
    sid = PLAN.repos[wc.repo_key]["source_id"]
    return [BUNDLED_DONE] if PLAN.sources[sid].startswith(_BUNDLED_ABS) else []


# No input function at all when nothing is bundled (one call per job saved at 5k keys).
BUNDLED_INPUT = repo_bundled if config["bundled"] else []
# Env jobs that publish their own repo need the bundled repositories too.
if config["bundled"]:
    for _r, _e in PLAN.folded.items():
        if PLAN.sources[PLAN.repos[_r]["source_id"]].startswith(_BUNDLED_ABS):
            ENV_DEPS[_e].append(BUNDLED_DONE)


def receipts_dir(wc, input):
    """The publish receipts' directory (holds env/, repo/ and interp/), from the index's
    first env receipt (a param derived from an input, not a second hard-coded path)."""
    env = input.env if isinstance(input.env, str) else input.env[0]
    return str(Path(env).parents[1])


wildcard_constraints:
    env_key="env-[^/]+",
    repo_key="repo-[^/]+",
    ikey="cpython-[^/]+",


localrules:
    bundled,
    index,
    interp,
    validated_tasks,
    labelled_tasks,
