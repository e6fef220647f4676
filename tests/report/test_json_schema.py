"""The JSON report against its published schema (cuda2neuron/report/report.schema.json).

The schema is what consumers code against, so real documents of every status (fixed, fixable
safe and unsafe, display-only, no fix, a failed file) must validate, the schema's enums must be
the engine's own values, and a document that breaks the contract must not validate.
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from cuda2neuron.core import Effort, Safety
from cuda2neuron.report import to_json, to_json_lines

SCHEMA = json.loads(resources.files("cuda2neuron.report").joinpath("report.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

EVERY_STATUS = {
    "u.py": "import torch\ntorch.backends.cudnn.benchmark = True\n",  # unsafe fix
    "d.py": "if x.is_cuda:\n    y = ext.fused(x)\n",  # display-only advice
    "a.py": "import apex\nx = y.cuda()\n",
    "broken.py": "import torch\nx = y.cuda()\ndef (:\n    pass\n",  # fails to parse
}


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize(
    ("command", "fix"),
    [
        pytest.param("check", False, id="check"),
        pytest.param("check", True, id="check-fix"),
        pytest.param("migrate", True, id="migrate"),
    ],
)
def test_real_documents_validate(make_report, command, fix):
    data = json.loads(to_json(make_report(EVERY_STATUS, fix=fix, command=command)))
    VALIDATOR.validate(data)
    statuses = {f["status"] for key in ("edits", "fixable", "manual_actions") for f in data[key]}
    assert statuses == ({"fixed", "fixable", "manual"} if fix else {"fixable", "manual"})
    assert data["failures"], "the broken file must appear as a failure"


def test_json_lines_records_validate(make_report):
    lines = to_json_lines(make_report(EVERY_STATUS)).splitlines()
    record = {"$ref": "#/$defs/json_lines_record", "$defs": SCHEMA["$defs"]}
    for line in lines:
        jsonschema.validate(json.loads(line), record, cls=jsonschema.Draft202012Validator)
    assert {json.loads(line)["type"] for line in lines} == {"finding", "failure"}


def test_schema_enums_are_the_engines_values():
    finding = SCHEMA["$defs"]["finding"]["properties"]
    assert finding["effort"]["enum"] == [e.value for e in Effort]
    assert finding["fix"]["oneOf"][1]["properties"]["safety"]["enum"] == [s.value for s in Safety]


@pytest.mark.parametrize(
    "breakage",
    [
        pytest.param(lambda d: d.pop("schema_version"), id="no-version"),
        pytest.param(lambda d: d.update(schema_version=2), id="other-version"),
        pytest.param(lambda d: d["fixable"][0].update(col=0), id="zero-based-column"),
        pytest.param(lambda d: d["fixable"][0].update(status="todo"), id="unknown-status"),
        pytest.param(lambda d: d["summary"].pop("unsafe_fixable"), id="missing-count"),
    ],
)
def test_schema_rejects_broken_documents(make_report, breakage):
    data = json.loads(to_json(make_report(EVERY_STATUS)))
    breakage(data)
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(data)
