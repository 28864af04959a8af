# mirror (one bare clone per source) -> snapshot (fresh single-commit repo) -> pack.


rule bundled:
    output:
        BUNDLED_DONE,
    log:
        "results/bundled/bundled.log",
    shell:
        "minisandbox pipeline bundled --dest {BUNDLED_DIR} --done {output} > {log} 2>&1"


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
        "minisandbox pipeline mirror --spec {input[0]} --mirror {params.mirror} --status {output.status} --log {log}"


rule snapshot:
    input:
        spec=f"{W}/specs/repo/{{repo_key}}.json",
        mirror=lambda wc: f"{W}/mirrors/{PLAN.repos[wc.repo_key]['source_id']}.status.json",
    output:
        tree=directory(f"{W}/repos/{{repo_key}}"),
        status=f"{W}/repos/{{repo_key}}.status.json",
    log:
        f"{W}/logs/snapshot/{{repo_key}}.log",
    params:
        mirror=lambda wc: f"{W}/mirrors/{PLAN.repos[wc.repo_key]['source_id']}.git",
    shell:
        "minisandbox pipeline snapshot --spec {input.spec} --mirror {params.mirror} --mirror-status {input.mirror}"
        " --out {output.tree} --status {output.status} > {log} 2>&1"


rule pack_repo:
    input:
        tree=f"{W}/repos/{{repo_key}}",
        status=f"{W}/repos/{{repo_key}}.status.json",
    output:
        archive=f"{W}/packed/repo/{{repo_key}}.{EXT}",
        status=f"{W}/packed/repo/{{repo_key}}.pack.json",
    log:
        f"{W}/logs/pack/{{repo_key}}.log",
    params:
        image="--image" if config["images"] else "",
    threads: 2
    shell:
        "minisandbox pipeline pack --key {wildcards.repo_key} --tree {input.tree} --upstream {input.status}"
        " --out {output.archive} --status {output.status} --format {FMT} --level {config[zstd_level]} {params.image}"
        " > {log} 2>&1"
