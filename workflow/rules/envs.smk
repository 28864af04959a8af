# resolve (uv lock) -> build (uv venv at the canonical path, in a mount namespace) -> pack.


def build_repo(wc):
    return f"{W}/repos/{PLAN.envs[wc.env_key]['repo_key']}"


rule resolve:
    input:
        spec=f"{W}/specs/env/{{env_key}}.json",
        repo=build_repo,
        repo_status=lambda wc: build_repo(wc) + ".status.json",
    output:
        f"{W}/locks/{{env_key}}.json",
    log:
        f"{W}/logs/resolve/{{env_key}}.log",
    shell:
        "minisandbox pipeline resolve --spec {input.spec} --repo {input.repo} --repo-status {input.repo_status}"
        " --out {output} --log {log}"


rule build:
    input:
        spec=f"{W}/specs/env/{{env_key}}.json",
        lock=f"{W}/locks/{{env_key}}.json",
        repo=build_repo,
    output:
        tree=temp(directory(f"{W}/envs/{{env_key}}")),
        status=f"{W}/envs/{{env_key}}.status.json",
    log:
        f"{W}/logs/build/{{env_key}}.log",
    threads: 2
    shell:
        "minisandbox pipeline build --spec {input.spec} --lock {input.lock} --repo {input.repo}"
        " --out {output.tree} --status {output.status} --log {log} --timeout {config[build_timeout]}"


rule pack_env:
    input:
        tree=f"{W}/envs/{{env_key}}",
        status=f"{W}/envs/{{env_key}}.status.json",
    output:
        archive=f"{W}/packed/env/{{env_key}}.{EXT}",
        status=f"{W}/packed/env/{{env_key}}.pack.json",
    log:
        f"{W}/logs/pack/{{env_key}}.log",
    params:
        image="--image" if config["images"] else "",
    threads: 2
    shell:
        "minisandbox pipeline pack --key {wildcards.env_key} --tree {input.tree} --upstream {input.status}"
        " --out {output.archive} --status {output.status} --format {FMT} --level {config[zstd_level]} {params.image}"
        " > {log} 2>&1"
