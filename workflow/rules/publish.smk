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
    shell:
        "minisandbox checksum --kind {wildcards.kind} --spec {input.spec} --archive {input.archive}"
        " --pack-status {input.pack} --upstream {input.upstream} --out {output}"


def publish_log(wc):
    return [f"{W}/logs/build/{wc.key}.log"] if wc.kind == "env" else []


rule publish:
    input:
        manifest=f"{W}/manifests/{{kind}}/{{key}}.json",
        archive=f"{W}/packed/{{kind}}/{{key}}.{EXT}",
        log=publish_log,
    output:
        f"{W}/published/{{kind}}/{{key}}.json",
    params:
        store=STORE,
        log=lambda wc, input: f"--log {input.log}" if input.log else "",
    shell:
        "minisandbox publish --store {params.store} --kind {wildcards.kind} --key {wildcards.key}"
        " --manifest {input.manifest} --archive {input.archive} {params.log} --out {output}"
