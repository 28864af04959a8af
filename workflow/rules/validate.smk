# Validation runs inside each environment's job (rules/envs.smk; docs/grading.md): for every
# task of the environment, in fresh sandboxes over the published layers: no patch -> F2P
# fail, P2P pass; gold patch -> all pass. Each job writes `validation/<env_key>.json`
# (per-task statuses: valid, env-broken, flaky, timeout) and its run logs; the index merges
# them. This file holds the one rule that reads them back into a task file.


rule validated_tasks:
    """Write the tasks whose validation status is `valid`, in their source format."""
    input:
        plan=PLAN_FILE,
        tasks=PLAN.tasks_file,
        index=f"{W}/index.json",
    output:
        "results/validated_tasks.jsonl",
    log:
        f"{W}/logs/validated_tasks.log",
    params:
        validation=f"{W}/validation",
    shell:
        "minisandbox pipeline validated-tasks --plan {input.plan} --validation-dir {params.validation}"
        " --tasks {input.tasks} --out {output} > {log} 2>&1"
