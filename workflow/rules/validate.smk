# validate: one job per environment (never per task). For every task of the environment,
# in fresh sandboxes over the published layers: no patch -> F2P fail, P2P pass; gold patch
# -> all pass. Writes per-task statuses (valid, env-broken, flaky, timeout) that the index
# rule merges, run logs, and the list of valid tasks. See docs/grading.md.


rule validate:
    input:
        tasks=f"{W}/specs/env-tasks/{{env_key}}.json",
        env=f"{W}/published/env/{{env_key}}.json",
        # SWE-bench tasks of one env start from several base commits: wait for those repos
        repos=env_repo_receipts,
    output:
        f"{W}/validation/{{env_key}}.json",
    log:
        f"{W}/logs/validate/{{env_key}}.log",
    params:
        plan=CURRENT_PLAN,
        store=STORE,
        logs=f"{W}/validation/logs",
        repeats=config["validate_repeats"],
    threads: 2
    shell:
        "minisandbox pipeline validate --plan {params.plan} --env-key {wildcards.env_key} --receipts {W}/published"
        " --store {params.store} --out {output} --logs {params.logs}/{wildcards.env_key} --repeats {params.repeats}"
        " --workers {threads} > {log} 2>&1"


rule validated_tasks:
    input:
        plan=PLAN_FILE,
        validation=expand(f"{W}/validation/{{key}}.json", key=ENV_KEYS),
    output:
        "results/validated_tasks.jsonl",
    log:
        f"{W}/logs/validated_tasks.log",
    params:
        tasks=PLAN.tasks_file,
    shell:
        "minisandbox pipeline validated-tasks --validation {input.validation} --tasks {params.tasks} --out {output}"
        " > {log} 2>&1"
