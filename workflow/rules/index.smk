# index: every task -> its artifacts, digests, status and log; plus the run report.


def validation_inputs(wc):
    if not config["validate"]:
        return []
    return [f"{W}/validation/{k}.json" for k in ENV_KEYS]


rule index:
    input:
        plan=PLAN_FILE,
        envs=expand(f"{W}/published/env/{{key}}.json", key=ENV_KEYS),
        repos=expand(f"{W}/published/repo/{{key}}.json", key=REPO_KEYS),
        interps=expand(f"{W}/published/interp/{{ikey}}.json", ikey=INTERP_KEYS),
        validation=validation_inputs,
    output:
        receipt=f"{W}/index.json",
        report="results/report.json",
    log:
        f"{W}/logs/index.log",
    params:
        store=STORE,
    shell:
        "minisandbox pipeline index --store {params.store} --plan {input.plan} --receipts {W}/published"
        " --validation {input.validation} --out {output.receipt} --report {output.report} 2>&1 | tee {log}"
