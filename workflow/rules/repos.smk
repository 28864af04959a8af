# bundled (optional) -> repo: one job per repo key (mirror once per source under a lock,
# snapshot, pack, checksum, publish; minisandbox.pipeline.steps.job_repo). One job instead
# of five: Snakemake plans ~1.5 ms per job (docs/pipeline.md, "Numbers").


rule bundled:
    """Create the bundled task set's git repositories (config/bundled/) locally."""
    output:
        BUNDLED_DONE,
    log:
        "results/bundled/bundled.log",
    params:
        dest=lambda wc, output: str(Path(output[0]).with_suffix("")),
    shell:
        "minisandbox pipeline bundled --dest {params.dest} --done {output} > {log} 2>&1"


rule repo:
    """Mirror, snapshot, pack and publish one repo key (the repo layer of its tasks)."""
    input:
        spec=f"{W}/specs/repo/{{repo_key}}.json",
        bundled=BUNDLED_INPUT,
    output:
        tree=directory(f"{W}/repos/{{repo_key}}"),
        receipt=f"{W}/published/repo/{{repo_key}}.json",
    log:
        f"{W}/logs/repo/{{repo_key}}.log",
    benchmark:
        f"{W}/benchmarks/repo/{{repo_key}}.tsv"
    threads: 2
    params:
        work=work_dir,
        store=STORE,
        fmt=FMT,
        level=config["zstd_level"],
        image=(
            ("--image --image-whole" if config["image_whole"] else "--image")
            if config["images"]
            else ""
        ),
    shell:
        "minisandbox pipeline repo --work {params.work} --store {params.store} --spec {input.spec}"
        " --format {params.fmt} --level {params.level} {params.image} --out {output.receipt} > {log} 2>&1"
