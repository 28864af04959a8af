# Config validation and planning (parse time). The plan is cached by its inputs' content,
# so every parse of a run (and of every cluster job) reads one small JSON. The plan cache
# and the per-key spec files (written only when missing or changed) are the only files
# written while parsing: the DAG is expanded over their keys. The bundled repos' directory
# is created by the `bundled` rule; planning only needs its (absolute) path.
from minisandbox.pipeline.keys import slug  # noqa: F401  (keeps the package import explicit)
from minisandbox.pipeline.plan import load_or_build_plan, write_current, write_key_specs
from minisandbox.manifest import FORMATS


def _coerce_bools(cfg, keys=("bundled", "validate", "images")):
    """`--config validate=true` arrives as a string; the schema wants a boolean."""
    for k in keys:
        if isinstance(cfg.get(k), str) and cfg[k].lower() in ("true", "false", "1", "0", "yes", "no"):
            cfg[k] = cfg[k].lower() in ("true", "1", "yes")


_coerce_bools(config)
validate(config, "../schemas/config.schema.yaml")


def _as_list(value):
    """`--config tasks=a.jsonl,b.jsonl` or a YAML list."""
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return list(value)


W = config["workdir"].rstrip("/")
STORE = config["store"]
FMT = config["format"]
EXT = FORMATS[FMT].lstrip(".")
TASK_FILES = _as_list(config["tasks"])
CATALOG_FILES = _as_list(config["catalog"])
BUNDLED_DIR = "results/bundled/repos"
BUNDLED_DONE = "results/bundled/repos.json"

PLAN = load_or_build_plan(TASK_FILES, CATALOG_FILES, Path.cwd(), Path(f"{W}/plan"))
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

wildcard_constraints:
    env_key="env-[^/]+",
    repo_key="repo-[^/]+",
    ikey="cpython-[^/]+",



def build_repo(wc):
    """The snapshot an environment is built against (its spec's commit)."""
    return f"{W}/repos/{PLAN.envs[wc.env_key]['repo_key']}"


def repo_bundled(wc):
    """Repos of bundled sources wait for the bundled repositories to exist."""
    sid = PLAN.repos[wc.repo_key]["source_id"]
    return [BUNDLED_DONE] if PLAN.sources[sid].startswith(_BUNDLED_ABS) else []


def env_repo_receipts(wc):
    """Validation waits for every repo its tasks start from (SWE-bench: several base commits)."""
    return [f"{W}/published/repo/{k}.json" for k in PLAN.env_repos[wc.env_key]]


# No input function at all when nothing is bundled (one call per job saved at 5k keys).
BUNDLED_INPUT = repo_bundled if config["bundled"] else []

def interp_receipt(wc):
    """An environment is published after its interpreter layer (rule `interp`; none for a
    system interpreter)."""
    key = getattr(wc, "env_key", None) or (wc.key if getattr(wc, "kind", None) == "env" else None)
    ikey = (PLAN.envs[key].get("interpreter") or {}).get("key") if key else None
    return [f"{W}/published/interp/{ikey}.json"] if ikey else []


localrules: bundled, index
