"""mini-swe-agent's SWE-bench batch runner over a task file, with minisandbox environments.

Why: `mini-extra swebench` (`minisweagent.run.benchmarks.swebench`) builds each
instance's environment from the config's `environment` section plus a Docker image name
it derives from the instance; a custom `environment_class` receives that section only,
never the instance id, so `MinisandboxEnvironment` cannot tell which task to open. This
runner keeps mini-swe-agent's own per-instance loop (`process_instance`: model, agent,
trajectory `<out>/<id>/<id>.traj.json`, `<out>/preds.json`, progress display, exit
statuses) and only supplies the environment per instance: the config's `environment`
section with `task_id` set to the instance id, and `environment_class` defaulting to
`minisandbox.integrations.minisweagent.MinisandboxEnvironment`.

    minisandbox-mini-batch --tasks tasks.jsonl \\
        --store results/store -o results/agent -c swebench.yaml -m <model> -w 4
    minisandbox eval --store results/store --predictions results/agent/preds.json

Instances come from task files (`minisandbox.records.read_tasks`: SWE-bench or SWE-smith
JSONL/JSON/Parquet; the agent sees `problem_statement`) or, without `--tasks`, from the
store's index. Tested with mini-swe-agent 2.4 (tests/e2e/test_integrations_minisweagent_batch.py);
docs/integrations/minisweagent.md. Follows mini-swe-agent's runner (MIT; NOTICE.md).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from minisandbox.errors import MinisandboxError

ENVIRONMENT_CLASS = "minisandbox.integrations.minisweagent.MinisandboxEnvironment"


class BatchError(MinisandboxError, ValueError):
    """Bad input to the batch runner (task file, filter, config)."""


def environment_config(config: dict[str, Any], instance: dict[str, Any], *, store: str | None = None) -> dict[str, Any]:
    """The `environment` section for one instance: the run's section, this task's id,
    the store (the section's own `store` wins over `--store`) and our class unless the
    section names a class by dotted path (cwd, timeout, env of swebench.yaml apply)."""
    env = {**config.get("environment", {})}
    if "." not in env.get("environment_class", ""):
        # mini-swe-agent's built-in names (its swebench.yaml says `docker`) start containers;
        # a dotted path is a class the user chose (e.g. a subclass of ours) and is kept
        env["environment_class"] = ENVIRONMENT_CLASS
    env["task_id"] = instance["instance_id"]
    if store and not env.get("store"):
        env["store"] = store
    return env


def make_environment(config: dict[str, Any], instance: dict[str, Any], *, store: str | None = None):
    """The instance's environment, plus the run's `env_startup_command` (a Jinja template
    over the instance's fields, as mini-swe-agent renders it)."""
    from jinja2 import StrictUndefined, Template
    from minisweagent.environments import get_environment

    env = get_environment(environment_config(config, instance, store=store))
    if startup := config.get("run", {}).get("env_startup_command"):
        out = env.execute({"command": Template(startup, undefined=StrictUndefined).render(**instance)})
        if out["returncode"] != 0:
            raise RuntimeError(f"env_startup_command failed for {instance['instance_id']}: {out}")
    return env


@contextmanager
def minisandbox_environments(store: str | None = None) -> Iterator[None]:
    """While active, mini-swe-agent's batch loop gets its environments from
    `make_environment` (its `get_sb_environment` is the one hook it calls per instance)."""
    from minisweagent.run.benchmarks import swebench as batch

    original = batch.get_sb_environment
    batch.get_sb_environment = lambda config, instance: make_environment(config, instance, store=store)
    try:
        yield
    finally:
        batch.get_sb_environment = original


def load_instances(tasks: list[str] | None, store: str | None) -> list[dict[str, Any]]:
    """Instances as mini-swe-agent's loop reads them (`instance_id`, `problem_statement`,
    and every other record field for `env_startup_command` templates)."""
    from minisandbox.records import read_tasks

    if tasks:
        ing = read_tasks(tasks)
        for bad in ing.invalid:
            print(f"minisweagent_batch: skipping invalid record {bad}", file=sys.stderr)
        records = list(ing.records)
    else:
        from minisandbox.task import task_records

        records = task_records(store)
    if not records:
        raise BatchError(f"no usable task in {' '.join(tasks) if tasks else 'the store index'}")
    return [r.to_dict() for r in records]


def run_batch(
    instances: list[dict[str, Any]],
    config: dict[str, Any],
    output: Path,
    *,
    store: str | None = None,
    workers: int = 1,
    redo_existing: bool = False,
) -> Path:
    """Run mini-swe-agent's `process_instance` for every instance (in `workers` threads);
    returns `<output>/preds.json` (SWE-bench predictions keyed by instance id, readable by
    `minisandbox eval --predictions`)."""
    from minisweagent.run.benchmarks import swebench as batch
    from minisweagent.run.benchmarks.utils.batch_progress import RunBatchProgressManager
    from minisweagent.utils.log import add_file_handler

    output.mkdir(parents=True, exist_ok=True)
    add_file_handler(output / "minisweagent.log")
    preds = output / "preds.json"
    if not redo_existing and preds.exists():
        done = set(json.loads(preds.read_text()))
        instances = [i for i in instances if i["instance_id"] not in done]
    progress = RunBatchProgressManager(len(instances), output / f"exit_statuses_{time.time()}.yaml")
    with minisandbox_environments(store), concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(batch.process_instance, inst, output, config, progress) for inst in instances]
        for fut in concurrent.futures.as_completed(futures):
            fut.result()  # process_instance records its own errors in the trajectory and preds.json
    return preds


def build_config(specs: list[str], model: str | None, model_class: str | None) -> dict[str, Any]:
    """mini-swe-agent's config merge: `-c` files/key=value specs, then `-m`/`--model-class`."""
    from minisweagent.config import get_config_from_spec
    from minisweagent.utils.serialize import UNSET, recursive_merge

    configs = [get_config_from_spec(spec) for spec in specs]
    configs.append({"model": {"model_name": model or UNSET, "model_class": model_class or UNSET}})
    return recursive_merge(*configs)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="minisandbox-mini-batch",
        description="Run mini-swe-agent's SWE-bench batch loop (`mini-extra swebench`) over task files, one "
        "minisandbox sandbox per instance (the environment gets the instance id; no Docker). Writes "
        "OUT/preds.json (grade it with `minisandbox eval --predictions OUT/preds.json`) and "
        "OUT/<id>/<id>.traj.json. Needs `pip install 'minisandbox[minisweagent]'`; "
        "docs/integrations/minisweagent.md.",
    )
    p.add_argument(
        "--tasks",
        nargs="+",
        help="task files (SWE-bench/SWE-smith JSONL/JSON/Parquet); default: the ready tasks of the store's index",
    )
    p.add_argument(
        "--store",
        help="published store URL (default: $MINISANDBOX_STORE, else the store: of "
        "./config/config.yaml, else ./results/store)",
    )
    p.add_argument("-o", "--output", required=True, help="output directory (preds.json, <id>/<id>.traj.json)")
    p.add_argument(
        "-c",
        "--config",
        action="append",
        dest="config_spec",
        help="mini-swe-agent config files (a name such as swebench.yaml finds its built-in one) or "
        "key=value specs, merged in order (default: its benchmarks/swebench.yaml)",
    )
    p.add_argument("-m", "--model", help="model name")
    p.add_argument("--model-class", help="model class (e.g. litellm, or a dotted path)")
    p.add_argument("-w", "--workers", type=int, default=1, help="instances at once (default: 1)")
    p.add_argument("--filter", default="", help="regex on instance ids")
    p.add_argument("--slice", default="", help="slice of the (filtered) instances, e.g. 0:5")
    p.add_argument("--redo-existing", action="store_true", help="run instances already in preds.json again")
    return p


def main(argv: list[str] | None = None) -> int:
    """The `minisandbox-mini-batch` command: one line for an error the user can fix."""
    a = parser().parse_args(argv)  # --help works without mini-swe-agent installed
    try:
        return _run(a)
    except MinisandboxError as exc:
        print(f"minisandbox-mini-batch: error: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "minisweagent":
            raise
        print(
            "minisandbox-mini-batch: error: mini-swe-agent is not installed: pip install 'minisandbox[minisweagent]'",
            file=sys.stderr,
        )
        return 1
    except FileNotFoundError as exc:  # mini-swe-agent's config lookup: a -c file that does not exist
        print(f"minisandbox-mini-batch: error: {exc}; check -c", file=sys.stderr)
        return 1


def _run(a: argparse.Namespace) -> int:
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # its banner would mix with our output
    try:
        re.compile(a.filter)
    except re.error as exc:
        raise BatchError(f"--filter {a.filter!r}: {exc}") from None
    from minisweagent.config import builtin_config_dir
    from minisweagent.run.benchmarks.swebench import filter_instances

    instances = filter_instances(load_instances(a.tasks, a.store), filter_spec=a.filter, slice_spec=a.slice)
    specs = a.config_spec or [str(builtin_config_dir / "benchmarks" / "swebench.yaml")]
    config = build_config(specs, a.model, a.model_class)
    preds = run_batch(
        instances, config, Path(a.output), store=a.store, workers=a.workers, redo_existing=a.redo_existing
    )
    print(f"predictions: {preds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
