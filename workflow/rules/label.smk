# Label mode (`--config label=true`, docs/labelling.md): each environment's job (rules/envs.smk)
# labels its candidates as SWE-smith does (one reference run of the fixed code per
# environment, one run per candidate bug) and writes `labels/<env_key>.json`. This file
# holds the one rule that reads them back into a task file and a report of what was dropped.


rule labelled_tasks:
    """Write the labelled candidates as SWE-smith records and report the dropped ones."""
    input:
        plan=PLAN_FILE,
        tasks=PLAN.tasks_file,
        index=f"{W}/index.json",
    output:
        tasks="results/labelled_tasks.jsonl",
        report="results/labelling_report.json",
    log:
        f"{W}/logs/labelled_tasks.log",
    params:
        labels=f"{W}/labels",
    shell:
        "minisandbox pipeline labelled-tasks --plan {input.plan} --labels-dir {params.labels}"
        " --tasks {input.tasks} --out {output.tasks} --report {output.report} > {log} 2>&1"
