# env: one job per env key (minisandbox.pipeline.envjob): the repo snapshot it is built at
# when nothing else uses it (mirror, snapshot, pack, publish), then resolve with uv, build
# the venv at the canonical path in a mount namespace, pack, checksum, publish with its build
# log, then validate the environment's tasks. One job instead of three (repo, env, validate):
# Snakemake plans ~1 ms per job (docs/pipeline.md, "Numbers"). A rerun caused only by new
# tasks (or other validation inputs) reuses the build and validates.


rule env:
    """Build and publish one environment (and the repo snapshot it is built at when no other
    environment or task uses it), then validate its tasks (in label mode: label its
    candidates); a failed build is recorded and published with its log (the job succeeds).
    """
    input:
        ENV_INPUT,
        deps=env_deps,
    output:
        receipt=ENV_RECEIPT,
        result=ENV_RESULT,
    log:
        f"{W}/logs/env/{{env_key}}.log",
    benchmark:
        f"{W}/benchmarks/env/{{env_key}}.tsv"
    threads: 2
    resources:
        **JOB_TMPDIR,
    shell:
        ENV_SHELL


rule interp:
    """Pack and publish one interpreter layer, shared by every environment built with it."""
    input:
        spec=f"{W}/specs/interp/{{ikey}}.json",
    output:
        f"{W}/published/interp/{{ikey}}.json",
    log:
        f"{W}/logs/interp/{{ikey}}.log",
    threads: 2
    resources:
        **JOB_TMPDIR,
    params:
        store=STORE,
        work=f"{W}/packed/interp",
        fmt=FMT,
        level=config["interp_zstd_level"],
    shell:
        "minisandbox pipeline interp --spec {input.spec} --store {params.store} --work {params.work}"
        " --format {params.fmt} --level {params.level} --out {output} > {log} 2>&1"
