# checksum (manifest beside each archive) -> publish (archive, then manifest; atomic).


def upstream_status(wc):
    if wc.kind == "env":
        return f"{W}/envs/{wc.key}.status.json"
    return f"{W}/repos/{wc.key}.status.json"


rule checksum:
    input:
        spec=f"{W}/specs/{{kind}}/{{key}}.json",
        archive=f"{W}/packed/{{kind}}/{{key}}.{EXT}",
        pack=f"{W}/packed/{{kind}}/{{key}}.pack.json",
        upstream=upstream_status,
    output:
        f"{W}/manifests/{{kind}}/{{key}}.json",
    log:
        f"{W}/logs/checksum/{{kind}}/{{key}}.log",
    shell:
        "minisandbox pipeline checksum --kind {wildcards.kind} --spec {input.spec} --archive {input.archive}"
        " --pack-status {input.pack} --upstream {input.upstream} --out {output} > {log} 2>&1"


def publish_log(wc):
    return [f"{W}/logs/build/{wc.key}.log"] if wc.kind == "env" else []


rule publish:
    input:
        manifest=f"{W}/manifests/{{kind}}/{{key}}.json",
        archive=f"{W}/packed/{{kind}}/{{key}}.{EXT}",
        build_log=publish_log,
    output:
        f"{W}/published/{{kind}}/{{key}}.json",
    log:
        f"{W}/logs/publish/{{kind}}/{{key}}.log",
    params:
        store=STORE,
        build_log=lambda wc, input: f"--log {input.build_log}" if input.build_log else "",
    shell:
        "minisandbox pipeline publish --store {params.store} --kind {wildcards.kind} --key {wildcards.key}"
        " --manifest {input.manifest} --archive {input.archive} {params.build_log} --out {output} > {log} 2>&1"
