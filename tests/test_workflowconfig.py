"""workflow/schemas/config.schema.yaml (what Snakemake validates the workflow's config with)
says what `minisandbox.workflowconfig.config_model()` says: the same keys, types, bounds,
defaults, required keys and descriptions, and no other key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from minisandbox.workflowconfig import config_model

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
#: What a property's constraint is made of (titles and the JSON schema dialect are not).
KEYS = ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "minLength", "minItems", "items")


def _words(text: str) -> str:
    return " ".join(text.split())


def _alternative(schema: dict) -> str:
    out = {k: schema[k] for k in KEYS if k in schema}
    if "items" in out:
        out["items"] = json.loads(_alternative(out["items"]))
    return json.dumps(out, sort_keys=True)


def normalized(schema: dict) -> dict:
    """Per property: its alternatives (oneOf/anyOf, or itself), default and description."""
    props = {}
    for name, prop in schema["properties"].items():
        alternatives = prop.get("oneOf") or prop.get("anyOf") or [prop]
        props[name] = {
            "alternatives": sorted(_alternative(a) for a in alternatives),
            "default": prop.get("default"),
            "description": _words(prop.get("description", "")),
        }
    return {
        "properties": props,
        "required": sorted(schema.get("required", [])),
        "additionalProperties": schema.get("additionalProperties"),
        "description": _words(schema["description"]),
    }


def test_the_workflow_schema_says_what_the_model_says() -> None:
    model = normalized(config_model().model_json_schema(by_alias=True))
    committed = normalized(yaml.safe_load(SCHEMA.read_text()))
    assert set(committed["properties"]) == set(model["properties"])
    for name in model["properties"]:
        assert committed["properties"][name] == model["properties"][name], name
    assert committed == model
    assert model["additionalProperties"] is False  # unknown keys are errors, as in the catalog's specs


def test_the_comparison_sees_a_changed_bound_and_a_missing_key() -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    model = normalized(config_model().model_json_schema(by_alias=True))
    schema["properties"]["zstd_level"]["maximum"] = 22
    assert normalized(schema)["properties"]["zstd_level"] != model["properties"]["zstd_level"]
    del schema["properties"]["signing_key"]
    assert set(normalized(schema)["properties"]) != set(model["properties"])


def test_the_default_config_is_valid_and_a_typo_is_an_error() -> None:
    from pydantic import ValidationError

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config_model().model_validate(config)
    with pytest.raises(ValidationError, match="validate_repeat"):
        config_model().model_validate({**config, "validate_repeat": 2})
