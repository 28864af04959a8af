# bundled (optional) -> repo: one job per repo key (mirror once per source under a lock,
# snapshot, pack, checksum, publish; minisandbox.pipeline.steps.job_repo). One job instead
# of five: Snakemake plans ~1.5 ms per job (docs/pipeline.md, "Numbers").


rule bundled:
    output:
        BUNDLED_DONE,
    log:
        "results/bundled/bundled.log",
    shell:
        "minisandbox pipeline bundled --dest {BUNDLED_DIR} --done {output} > {log} 2>&1"


rule repo:
    input:
        spec=f"{W}/specs/repo/{{repo_key}}.json",
        bundled=BUNDLED_INPUT,
    output:
        tree=directory(f"{W}/repos/{{repo_key}}"),
        receipt=f"{W}/published/repo/{{repo_key}}.json",
    log:
        f"{W}/logs/repo/{{repo_key}}.log",
    params:
        work=W,
        store=STORE,
        image="--image" if config["images"] else "",
    threads: 2
    shell:
        "minisandbox pipeline repo --work {params.work} --store {params.store} --spec {input.spec}"
        " --format {FMT} --level {config[zstd_level]} {params.image} --out {output.receipt} > {log} 2>&1"
