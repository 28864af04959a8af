# mirror (one bare clone per source) -> snapshot (fresh single-commit repo) -> pack.


rule bundled:
    output:
        BUNDLED_DONE,
    shell:
        "minisandbox bundled --dest {BUNDLED_DIR} --done {output}"


def mirror_inputs(wc):
    inputs = [f"{W}/specs/source/{wc.sid}.json"]
    if config["bundled"] and PLAN.sources[wc.sid].startswith(_BUNDLED_ABS):
        inputs.append(BUNDLED_DONE)
    return inputs


rule mirror:
    input:
        mirror_inputs,
    output:
        status=f"{W}/mirrors/{{sid}}.status.json",
    log:
        f"{W}/logs/mirror/{{sid}}.log",
    params:
        mirror=lambda wc: f"{W}/mirrors/{wc.sid}.git",
    shell:
        "minisandbox mirror --spec {input[0]} --mirror {params.mirror} --status {output.status} --log {log}"


rule snapshot:
    input:
        spec=f"{W}/specs/repo/{{repo_key}}.json",
        mirror=lambda wc: f"{W}/mirrors/{PLAN.repos[wc.repo_key]['source_id']}.status.json",
    output:
        tree=directory(f"{W}/repos/{{repo_key}}"),
        status=f"{W}/repos/{{repo_key}}.status.json",
    params:
        mirror=lambda wc: f"{W}/mirrors/{PLAN.repos[wc.repo_key]['source_id']}.git",
    shell:
        "minisandbox snapshot --spec {input.spec} --mirror {params.mirror} --mirror-status {input.mirror}"
        " --out {output.tree} --status {output.status}"


rule pack_repo:
    input:
        tree=f"{W}/repos/{{repo_key}}",
        status=f"{W}/repos/{{repo_key}}.status.json",
    output:
        archive=f"{W}/packed/repo/{{repo_key}}.{EXT}",
        status=f"{W}/packed/repo/{{repo_key}}.pack.json",
    params:
        image="--image" if config["images"] else "",
    threads: 2
    shell:
        "minisandbox pack --key {wildcards.repo_key} --tree {input.tree} --upstream {input.status}"
        " --out {output.archive} --status {output.status} --format {FMT} --level {config[zstd_level]} {params.image}"
