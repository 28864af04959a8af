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
import sys
from pathlib import Path

from snakemake.utils import validate

from minisandbox.errors import MinisandboxError
from minisandbox.manifest import FORMATS
from minisandbox.pipeline.plan import (
    invalid_summary,
    load_or_build_plan,
    write_current,
    write_key_specs,
)


def _coerce_bools(cfg, keys=("bundled", "validate", "images", "image_whole")):
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


_coerce_bools(config)
validate(config, "../schemas/config.schema.yaml")

W = config["workdir"].rstrip("/")
STORE = config["store"]
FMT = config["format"]
EXT = FORMATS[FMT].lstrip(".")
TASK_FILES = _as_list(config["tasks"])
CATALOG_FILES = _as_list(config["catalog"])
BUNDLED_DIR = "results/bundled/repos"
BUNDLED_DONE = f"{BUNDLED_DIR}.json"

# Bad input stops the run with one line naming the file (and record, field), not a stack.
try:
    PLAN = load_or_build_plan(TASK_FILES, CATALOG_FILES, Path.cwd(), Path(f"{W}/plan"))
except MinisandboxError as exc:
    sys.exit(f"minisandbox: {exc}")
_warning, _fatal = invalid_summary(PLAN)
if _fatal:
    sys.exit(f"minisandbox: {_fatal}")
if _warning and workflow.is_main_process:
    print(_warning, file=sys.stderr)

PLAN_FILE = str(Path(PLAN.tasks_file).with_name("plan.json"))
write_key_specs(PLAN, Path(f"{W}/specs"))
# Same content as PLAN_FILE at a path that never changes: per-key rules take it as a param,
# so adding tasks reruns only the jobs whose own inputs changed.
CURRENT_PLAN = f"{W}/plan/current.json"
write_current(PLAN, Path(CURRENT_PLAN))

ENV_KEYS = sorted(PLAN.envs)
INTERP_KEYS = sorted(PLAN.interps)
REPO_KEYS = sorted(PLAN.repos)
_BUNDLED_ABS = str(Path(BUNDLED_DIR).resolve())


# ----------------------------------------------------------------- input/param functions
def build_repo(wc):
    """The snapshot an environment is built against (its spec's commit)."""
    return f"{W}/repos/{PLAN.envs[wc.env_key]['repo_key']}"


def repo_bundled(wc):
    """Repos of bundled sources wait for the bundled repositories to exist."""
    sid = PLAN.repos[wc.repo_key]["source_id"]
    return [BUNDLED_DONE] if PLAN.sources[sid].startswith(_BUNDLED_ABS) else []


# No input function at all when nothing is bundled (one call per job saved at 5k keys).
BUNDLED_INPUT = repo_bundled if config["bundled"] else []


def env_repo_receipts(wc):
    """Validation waits for every repo its tasks start from (SWE-bench: several base commits)."""
    return [f"{W}/published/repo/{k}.json" for k in PLAN.env_repos[wc.env_key]]


def interp_receipt(wc):
    """An environment is published after its interpreter layer (rule `interp`; none for a
    system interpreter)."""
    key = getattr(wc, "env_key", None) or (
        wc.key if getattr(wc, "kind", None) == "env" else None
    )
    ikey = (PLAN.envs[key].get("interpreter") or {}).get("key") if key else None
    return [f"{W}/published/interp/{ikey}.json"] if ikey else []


def validation_inputs(wc):
    """The index merges every environment's validation (when validation is on)."""
    if not config["validate"]:
        return []
    return [f"{W}/validation/{k}.json" for k in ENV_KEYS]


def work_dir(wc, output):
    """The run's workdir, from the job's receipt (`<workdir>/published/<kind>/<key>.json`)."""
    return str(Path(output.receipt).parents[2])


def receipts_dir(wc, input):
    """The publish receipts' directory (holds env/ and repo/), from an env receipt input."""
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
