"""The published JSON Schema of the run file, generated from the typed models.

Contract: :func:`schema` is the schema of :class:`layerscope.runfile.models.RunFile` (draft 2020-12);
``run.schema.json`` next to this module is its shipped copy, rewritten by ``python -m layerscope.runfile.schema``
(``tests/test_runfile.py`` fails when it is stale); :func:`shipped_text` reads that copy.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from layerscope.runfile.io import SCHEMA_VERSION
from layerscope.runfile.models import RunFile

SCHEMA_FILE = "run.schema.json"


def schema() -> dict[str, Any]:
    """The run file's JSON Schema, generated now."""
    body = RunFile.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:layerscope:run:{SCHEMA_VERSION}",
            **body,
            "description": f"A layerscope run file, schema_version {SCHEMA_VERSION}. "
                           + str(body.get("description", ""))}


def schema_text() -> str:
    """:func:`schema` as the bytes shipped in the package."""
    return json.dumps(schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def shipped_text() -> str:
    """The shipped ``run.schema.json``."""
    return resources.files("layerscope.runfile").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def main() -> int:
    """Rewrite the shipped schema from the models."""
    path = Path(__file__).with_name(SCHEMA_FILE)
    path.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
