"""What --check-advice reads of a verdict's prediction is what docs/verdict.schema.json
describes: the same keys, each required, of the same types, least values and choices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from pinchpoint.compare.advice_shapes import Prediction

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "verdict.schema.json").read_text()
)


def _plain(field: dict[str, Any]) -> dict[str, Any]:
    """A property as (types, least, choices, inner), whichever way the schema spells it."""
    if "$ref" in field:
        field = SCHEMA["$defs"][field["$ref"].removeprefix("#/$defs/")]
    if "anyOf" in field:
        parts = [_plain(f) for f in field["anyOf"]]
        types = sorted(t for p in parts for t in p["types"])
        least = {p["least"] for p in parts} - {None}
        return {"types": types, "least": least.pop() if least else None, "enum": None}
    kinds = field.get("type", "string" if "enum" in field else None)
    plain = {
        "types": sorted(kinds if isinstance(kinds, list) else [kinds]),
        "least": field.get("minimum"),
        "enum": field.get("enum"),
    }
    if isinstance(field.get("additionalProperties"), dict):
        plain["values"] = _plain(field["additionalProperties"])
    return plain


def test_the_prediction_read_is_the_one_the_schema_describes() -> None:
    documented = SCHEMA["$defs"]["prediction"]
    read = TypeAdapter(Prediction).json_schema()
    assert sorted(read["required"]) == sorted(documented["required"])
    assert read["additionalProperties"] is documented["additionalProperties"] is False
    assert read["properties"].keys() == documented["properties"].keys()
    for name, field in documented["properties"].items():
        assert _plain(read["properties"][name]) == _plain(field), name
