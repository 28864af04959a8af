# env: one job per env key (resolve with uv, build the venv at the canonical path in a mount
# namespace, pack, checksum, publish with its build log; minisandbox.pipeline.steps.job_env).
# One job instead of five: Snakemake plans ~1.5 ms per job (docs/pipeline.md, "Numbers").


rule env:
    """Resolve, build (at the canonical path, in a mount namespace), pack and publish one
    environment; a failed build is recorded and published with its log (the job succeeds).
    """
    input:
        spec=f"{W}/specs/env/{{env_key}}.json",
        repo=build_repo,
        interp=interp_receipt,
    output:
        receipt=f"{W}/published/env/{{env_key}}.json",
    log:
        f"{W}/logs/env/{{env_key}}.log",
    benchmark:
        f"{W}/benchmarks/env/{{env_key}}.tsv"
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
        timeout=config["build_timeout"],
    shell:
        "minisandbox pipeline env --work {params.work} --store {params.store} --spec {input.spec}"
        " --repo {input.repo} --format {params.fmt} --level {params.level} {params.image}"
        " --timeout {params.timeout} --out {output.receipt} > {log} 2>&1"


rule interp:
    """Pack and publish one interpreter layer, shared by every environment built with it."""
    input:
        spec=f"{W}/specs/interp/{{ikey}}.json",
    output:
        f"{W}/published/interp/{{ikey}}.json",
    log:
        f"{W}/logs/interp/{{ikey}}.log",
    threads: 2
    params:
        store=STORE,
        work=f"{W}/packed/interp",
        fmt=FMT,
        level=config["zstd_level"],
    shell:
        "minisandbox pipeline interp --spec {input.spec} --store {params.store} --work {params.work}"
        " --format {params.fmt} --level {params.level} --out {output} > {log} 2>&1"
