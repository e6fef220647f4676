"""`check`: linter exit codes and machine-readable output."""

from __future__ import annotations

import io
import json
import sys

import pytest


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = 1\n", 0, id="clean"),
        pytest.param("x = y.cuda()\n", 1, id="findings"),
        pytest.param("x = y.cuda(\ndef (:\n", 2, id="syntax-error"),
    ],
)
def test_exit_codes(tmp_path, run, source, expected):
    f = tmp_path / "a.py"
    f.write_text(source)
    assert run("check", str(f))[0] == expected


def test_no_files_is_clean(run, monkeypatch):
    # Under pre-commit (a hook forced to run with no files): nothing to check. Without it, no
    # PATHS is the current folder (tests/cli/test_first_hour.py).
    monkeypatch.setenv("PRE_COMMIT", "1")
    code, _, err = run("check")
    assert code == 0 and "no files" in err


def test_json_output(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    code, out, _ = run("check", str(f), "--output-format", "json")
    data = json.loads(out)
    assert code == 1
    # A fixable finding is not a manual action: --fix takes it.
    assert data["manual_actions"] == []
    assert data["fixable"][0]["code"] == "CN101"
    assert data["summary"]["fixable"] == 1
    assert data["fixable"][0]["fix"]["safety"] == "safe"


def test_sarif_output(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    _, out, _ = run("check", str(f), "--output-format", "sarif")
    sarif = json.loads(out)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "CN101"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert sarif["runs"][0]["tool"]["driver"]["rules"][0]["id"] == "CN101"


def test_fix_rewrites_and_exits_zero_when_nothing_remains(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    assert run("check", "--fix", str(f))[0] == 0  # ruff: everything fixed is clean
    assert f.read_text() == 'x = y.to("neuron")\n'
    assert run("check", str(f))[0] == 0


@pytest.mark.parametrize("fix", [False, True], ids=["report", "fix"])
def test_stdin(monkeypatch, run, fix):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x = y.cuda()\n")))
    args = ["check", "-", "--stdin-filename", "mod.py"] + (["--fix"] if fix else [])
    code, out, err = run(*args)
    if fix:
        assert out == 'x = y.to("neuron")\n' and code == 0
    else:
        assert "mod.py:1:5: CN101" in out and code == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--select", "CN1", "--ignore", "CN101"], None, id="ignore-more-specific"),
        pytest.param(["--select", "CN2"], None, id="select-other-family"),
    ],
)
def test_selection(tmp_path, run, args, message):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    assert run("check", str(f), *args)[0] == 0


def test_suppression_comment(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()  # cuda2neuron: ignore[CN101]\nz = w.cuda()  # cuda2neuron: ignore\n")
    assert run("check", str(f))[0] == 0


def test_config_errors_name_file_and_key(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text("[tool.cuda2neuron]\nselcet = ['CN1']\n")
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    code, _, err = run("check", str(f))
    assert code == 2
    assert "pyproject.toml" in err and "selcet" in err


def test_config_is_read(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text("[tool.cuda2neuron]\nignore = ['CN101']\n")
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    assert run("check", str(f))[0] == 0


def test_per_file_ignores(tmp_path, run):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.cuda2neuron]\n[tool.cuda2neuron.per-file-ignores]\n'legacy/*.py' = ['CN1']\n"
    )
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "a.py").write_text("x = y.cuda()\n")
    (tmp_path / "b.py").write_text("x = y.cuda()\n")
    assert run("check", str(tmp_path / "legacy" / "a.py"))[0] == 0
    assert run("check", str(tmp_path / "b.py"))[0] == 1


def test_min_torch_defaults_to_the_projects_requirements(tmp_path):
    from cuda2neuron.cli._options import apply_overrides
    from cuda2neuron.core import Config

    (tmp_path / "requirements.txt").write_text("torch>=2.6\n")
    assert apply_overrides(Config(), {}, [tmp_path]).settings.min_torch == (2, 6)
    # An explicit value wins over the requirements.
    assert apply_overrides(Config(), {"min_torch": "2.8"}, [tmp_path]).settings.min_torch == (2, 8)
    assert apply_overrides(Config(min_torch_given=True), {}, [tmp_path]).settings.min_torch == (2, 9)


@pytest.mark.parametrize(
    ("args", "requirements", "rewritten", "says"),
    [
        pytest.param([], None, True, "needs torch-neuronx >= 2.13.3.1 / 2.14.3.1", id="unknown-release-named"),
        pytest.param(["--min-torch-neuronx", "2.14.3.0"], None, False, "min-torch-neuronx is 2.14.3.0", id="neuron-2.33-reported"),
        pytest.param(["--min-torch-neuronx", "2.14.3.1"], None, True, None, id="neuron-2.34-rewritten"),
        pytest.param([], "torch-neuronx>=2.13.3.0\n", False, "min-torch-neuronx is 2.13.3.0", id="from-requirements"),
    ],
)
def test_min_torch_neuronx_gates_accelerator_memory(tmp_path, run, args, requirements, rewritten, says):
    # torch.accelerator.memory.* works on Trainium from torch-neuronx 2.13.3.1 / 2.14.3.1 only.
    f = tmp_path / "a.py"
    f.write_text("import torch\ntorch.cuda.empty_cache()\n")
    if requirements is not None:
        (tmp_path / "requirements.txt").write_text(requirements)
    _, out, _ = run("check", str(f), "--target", "accelerator", "--output-format", "json", *args)
    data = json.loads(out)
    (finding,) = data["fixable"] + data["manual_actions"]
    assert (finding in data["fixable"]) == rewritten
    text = finding["message"] + " " + finding.get("guidance", "")
    assert (says in text) if says else ("torch-neuronx" not in text)


def test_bad_min_torch_neuronx_is_a_usage_error(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    code, _, err = run("check", str(f), "--min-torch-neuronx", "2.14.x")
    assert code == 2 and "--min-torch-neuronx" in err
