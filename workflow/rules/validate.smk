# validate: one job per environment (never per task). For every task of the environment,
# in fresh sandboxes over the published layers: no patch -> F2P fail, P2P pass; gold patch
# -> all pass. Writes per-task statuses (valid, env-broken, flaky, timeout) that the index
# rule merges, run logs, and the list of valid tasks. See docs/grading.md.


rule validate:
    """Validate every task of one environment (before: F2P fail, P2P pass; gold: all pass)."""
    input:
        tasks=f"{W}/specs/env-tasks/{{env_key}}.json",
        env=f"{W}/published/env/{{env_key}}.json",
        repos=env_repo_receipts,
    output:
        f"{W}/validation/{{env_key}}.json",
    log:
        f"{W}/logs/validate/{{env_key}}.log",
    benchmark:
        f"{W}/benchmarks/validate/{{env_key}}.tsv"
    threads: 2
    params:
        plan=CURRENT_PLAN,
        store=STORE,
        receipts=receipts_dir,
        logs=lambda wc, output: str(Path(output[0]).parent / "logs" / wc.env_key),
        repeats=config["validate_repeats"],
    shell:
        "minisandbox pipeline validate --plan {params.plan} --env-key {wildcards.env_key}"
        " --receipts {params.receipts} --store {params.store} --out {output} --logs {params.logs}"
        " --repeats {params.repeats} --workers {threads} > {log} 2>&1"


rule validated_tasks:
    """Write the tasks whose validation status is `valid`, in their source format."""
    input:
        plan=PLAN_FILE,
        tasks=PLAN.tasks_file,
        validation=expand(f"{W}/validation/{{key}}.json", key=ENV_KEYS),
    output:
        "results/validated_tasks.jsonl",
    log:
        f"{W}/logs/validated_tasks.log",
    shell:
        "minisandbox pipeline validated-tasks --validation {input.validation} --tasks {input.tasks} --out {output}"
        " > {log} 2>&1"
