# minisandbox: task records -> unique repo snapshots and environments -> published store.
# The DAG expands over unique keys (never over tasks); rules are thin and call the
# `minisandbox` package. See docs/design.md and docs/pipeline.md.
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.0")

# Defaults from the checkout; --configfile / --config override them.
configfile: str(Path(workflow.basedir) / "config" / "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/repos.smk"
include: "workflow/rules/envs.smk"
if config["validate"]:
    include: "workflow/rules/validate.smk"
include: "workflow/rules/index.smk"


rule all:
    input:
        f"{W}/index.json",
        ["results/validated_tasks.jsonl"] if config["validate"] else [],
    default_target: True
