"""The workflow's settings (config/config.yaml, `--config KEY=VALUE`) as a pydantic model.

One config style: the catalog's specs (`minisandbox.catalog.spec_model`), the store's
documents (`minisandbox.manifest`, `minisandbox.index`) and the workflow's settings are
pydantic models that forbid unknown keys and document every field. Snakemake validates a
workflow's config against a JSON schema, so workflow/schemas/config.schema.yaml stays;
tests/test_workflowconfig.py checks it says what this model says (every key, type, bound,
default and description), so the two cannot drift. Built on first use, like the others.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel


@functools.cache
def config_model() -> type[BaseModel]:
    """The model of the workflow's configuration (unknown keys forbidden)."""
    from pydantic import BaseModel, ConfigDict, Field, StringConstraints

    Text = Annotated[str, StringConstraints(min_length=1)]
    Files = Text | Annotated[list[Text], Field(min_length=1)]

    class WorkflowConfig(BaseModel):
        """minisandbox workflow configuration (config/config.yaml; described in config/README.md).
        Every key can be overridden with --config KEY=VALUE or --configfile FILE."""

        model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

        tasks: Files
        """task file(s), JSONL/JSON/Parquet, SWE-smith or SWE-bench records; a path or a list"""
        catalog: Files
        """environment-spec catalog file(s) that map tasks to environments (docs/catalog.md)"""
        store: Text
        """where artifacts and the index are published, a local directory or an fsspec URL (s3://...)"""
        workdir: Text
        """scratch space for mirrors, snapshots, builds, receipts, logs and the cached plan"""
        bundled: bool = True
        """create the bundled task set's git repositories (needed by config/catalog/bundled.yaml)"""
        format: Literal["tar.zst", "tar.gz"] = "tar.zst"
        """archive format of the published artifacts"""
        images: bool = True
        """also publish a squashfs image per artifact, which nodes mount instead of unpacking"""
        archive: bool = False
        """also publish a tar archive per repo and env layer; with images off it is always published
        (the only representation)"""
        image_whole: bool = False
        """also upload each image as one file; by default the store holds only its chunks and chunk
        list (shared across environments), from which nodes assemble it"""
        zstd_level: Annotated[int, Field(ge=1, le=19)] = 3
        """zstd compression level of tar.zst archives"""
        interp_zstd_level: Annotated[int, Field(ge=1, le=19)] = 2
        """zstd compression level of the interpreter layers' tar.zst archives"""
        build_timeout: Annotated[float, Field(gt=0)] = 1800
        """seconds before one environment build is killed"""
        validate_: bool = Field(True, alias="validate")
        """validate every task after building (gold patch passes, no patch fails), one job per
        environment"""
        validate_repeats: Annotated[int, Field(ge=1)] = 1
        """runs of each validation (or labelling) phase; more than 1 detects flaky tests"""
        label: bool = False
        """label mode: the task files hold SWE-smith records whose FAIL_TO_PASS/PASS_TO_PASS are
        absent or empty (candidate bugs); each environment's job computes the lists as SWE-smith
        does instead of validating (docs/labelling.md); output results/labelled_tasks.jsonl"""
        label_max_f2p: Annotated[int, Field(ge=0)] = 0
        """in label mode, drop a candidate with more FAIL_TO_PASS tests than this (an over-broad
        bug); 0 for no limit"""
        label_resume_passes: Annotated[int, Field(ge=0, le=10)] = 2
        """in label mode, bug runs again over exactly the tests a bug run killed at the timeout
        never reached, while a pass makes progress; 0 gives SWE-smith's labels (every unreached
        test is FAIL_TO_PASS)"""
        retry_failed: bool = False
        """rebuild exactly the interpreter layers, repos and environments whose receipts record a
        failure (and what depends on them); what succeeded is left alone. A plain rerun never
        retries a recorded failure"""
        signing_key: str = ""
        """ed25519 private key (PEM, `openssl genpkey -algorithm ed25519`) that signs every published
        manifest, index shard and the catalog (a detached `.sig` beside each; docs/pipeline.md);
        empty: publish unsigned. Nodes verify with the public key ($MINISANDBOX_STORE_PUBLIC_KEY)"""

    WorkflowConfig.__qualname__ = "WorkflowConfig"
    return WorkflowConfig
