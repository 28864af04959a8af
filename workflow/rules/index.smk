# index: every task -> its artifacts, digests, status and log; plus the run report.


rule index:
    """Write the store's task index (all tasks -> artifacts, status, log) and the run report."""
    input:
        plan=PLAN_FILE,
        env=expand(f"{W}/published/env/{{key}}.json", key=ENV_KEYS),
        repos=expand(f"{W}/published/repo/{{key}}.json", key=REPO_KEYS),
        interps=expand(f"{W}/published/interp/{{ikey}}.json", ikey=INTERP_KEYS),
    output:
        receipt=f"{W}/index.json",
        report="results/report.json",
    log:
        f"{W}/logs/index.log",
    params:
        store=STORE,
        receipts=receipts_dir,
        # each env job writes its validation result with its receipt
        validation=f"--validation-dir {W}/validation" if VALIDATE else "",
    shell:
        "minisandbox pipeline index --store {params.store} --plan {input.plan} --receipts {params.receipts}"
        " {params.validation} --out {output.receipt} --report {output.report} 2>&1 | tee {log}"
