# bundled (optional) -> repo: one job per repo key that several environments or tasks use
# (mirror once per source under a lock, snapshot, pack, checksum, publish;
# minisandbox.pipeline.steps.job_repo). A repo only one environment uses is done inside that
# environment's job (Plan.folded, rules/envs.smk).


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
    """Mirror, snapshot, pack and publish one repo key used by several environments or tasks."""
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
    resources:
        **JOB_TMPDIR,
    shell:
        REPO_SHELL
