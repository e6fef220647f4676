"""`cuda2neuron validate` through click's CliRunner: help, argument errors, reports, exit codes."""

from __future__ import annotations

import json
import pytest
from click.testing import CliRunner

from cuda2neuron.cli._validate import validate_command
from validate_helpers import PORT_DEVICE, copy_with_patches


def invoke(*args: str):
    return CliRunner().invoke(validate_command, list(args), catch_exceptions=False)


def test_help_says_it_runs_the_users_code():
    out = invoke("--help").output
    assert "RUN the original and the ported code" in out
    assert "executes your code" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "give ORIGINAL PORT"),
        (("{o}", "{p}"), "give --entry module:callable or --script"),
        (("{o}", "{p}", "--entry", "entry:build", "--script", "train.py"), "exclusive"),
        (("{o}", "{p}", "--entry", "entry:build", "--", "--steps", "3"), "arguments after -- are for --script only"),
        (("{o}", "{p}", "--entry", "entry:build", "--report", "out.txt"), "must end in .md, .json or .html"),
        (("{o}", "{p}", "--entry", "entry:build", "--tolerance", "fudge=2"), "unknown tolerance"),
        (("{o}", "{p}", "--entry", "entry:build", "--tolerance", "pass_factor"), "expected NAME=VALUE"),
        (("{o}", "{p}", "--entry", "entry:build", "--steps", "0"), "0"),
        (("{o}", "{p}", "--entry", "entry:build", "--logic-steps", "0"), "'--logic-steps': 0 is not in the range"),
        (("{o}/missing", "{p}", "--entry", "entry:build"), "not a directory"),
    ],
    ids=["no-paths", "no-mode", "both-modes", "args-without-script", "bad-report-suffix", "unknown-tolerance",
         "tolerance-syntax", "zero-steps", "zero-logic-steps", "missing-tree"],
)
def test_bad_arguments_exit_2_before_running_anything(mlp, args, fragment):
    o, p = str(mlp / "original"), str(mlp / "port")
    result = invoke(*(a.format(o=o, p=p) for a in args))
    assert result.exit_code == 2
    assert fragment in result.output


@pytest.fixture(scope="module")
def reports(mlp, tmp_path_factory):
    """One passing and one failing run through the CLI, each writing both report formats."""
    root = tmp_path_factory.mktemp("reports")
    broken = copy_with_patches(mlp / "port", root / "broken", (("model.py", "F.gelu(", "F.relu("),))
    out = {}
    for name, port in (("pass", mlp / "port"), ("fail", broken)):
        md, js = root / f"{name}.md", root / f"{name}.json"
        first = invoke(str(mlp / "original"), str(port), "--entry", "entry:build", "--steps", "2", "--no-golden",
                       "--port-device", PORT_DEVICE, "--report", str(js))
        md_text = None
        if name == "fail":
            second = invoke(str(mlp / "original"), str(port), "--entry", "entry:build", "--steps", "2", "--no-golden",
                            "--port-device", PORT_DEVICE, "--report", str(md))
            assert second.exit_code == first.exit_code
            md_text = md.read_text()
            html = root / "fail.html"
            third = invoke(str(mlp / "original"), str(port), "--entry", "entry:build", "--steps", "2", "--no-golden",
                           "--port-device", PORT_DEVICE, "--report", str(html))
            assert third.exit_code == first.exit_code
            out["fail.html"] = html.read_text()
        out[name] = (first, json.loads(js.read_text()), md_text)
    return out


def test_passing_port_exits_0_with_json_report(reports):
    result, data, _ = reports["pass"]
    assert result.exit_code == 0, result.output
    assert data["verdict"] in ("PASS", "WARN") and data["exit_code"] == 0
    assert data["counts"]["FAIL"] == 0 and data["counts"]["WARN"] == 0 and data["counts"]["PASS"] > 10
    assert data["verdict"] in result.output


def test_failing_port_exits_1_and_names_the_module(reports):
    result, data, md = reports["fail"]
    assert result.exit_code == 1
    assert data["verdict"] == "FAIL"
    assert data["divergence"]["module_path"] == "0:blocks.0.drop"
    assert "first divergence" in result.output
    assert "# cuda2neuron validate: FAIL" in md
    assert "`0:blocks.0.drop` (Dropout)" in md
    assert "model.py:" in md


def test_config_table_supplies_entry_and_steps(mlp, tmp_path):
    original = copy_with_patches(mlp / "original", tmp_path / "original", ())
    port = copy_with_patches(mlp / "port", tmp_path / "port", ())
    (port / "pyproject.toml").write_text('[tool.cuda2neuron.validate]\nentry = "entry:build"\nsteps = 1\n')
    js = tmp_path / "r.json"
    result = invoke(str(original), str(port), "--no-golden", "--port-device", PORT_DEVICE, "--report", str(js))
    assert result.exit_code == 0, result.output
    data = json.loads(js.read_text())
    assert data["mode"] == "entry" and data["target"] == "entry:build"
    assert {c["step"] for c in data["comparisons"] if c["kind"] == "grad"} == {0}


def test_git_revision_mode(mlp, tmp_path):
    """One path after an in-place migrate: the original comes from HEAD."""
    import subprocess

    repo = copy_with_patches(mlp / "original", tmp_path / "repo", ())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "cuda"], cwd=repo, check=True)
    for f in ("entry.py", "model.py"):
        (repo / f).write_text((mlp / "port" / f).read_text())
    result = invoke(str(repo), "--entry", "entry:build", "--steps", "1", "--no-golden", "--port-device", PORT_DEVICE)
    assert result.exit_code == 0, result.output
    assert "at HEAD" in result.output
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert sorted(status.split()) == ["M", "M", "entry.py", "model.py"]  # no __pycache__, nothing else


def test_failing_port_html_report(reports):
    """`validate --report x.html`: the verdict table and the first divergence, on one page (the
    browser checks of the page are in tests/report/test_html_report.py)."""
    page = reports["fail.html"]
    _, data, _ = reports["fail"]
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert f'<span class="verdict {data["verdict"]}">{data["verdict"]}</span>' in page
    assert "<table id=verdicts>" in page and '<h3 id="divergence">First divergence</h3>' in page
    assert data["divergence"]["key"] in page
    assert page.count('<tr data-filter="FAIL ') == data["counts"]["FAIL"]


@pytest.mark.parametrize("name", ["pass", "fail"])
def test_the_verdict_goes_to_stdout_as_one_line(reports, name):
    """People's summary is on stderr; stdout carries the verdict alone, for pipes and CI."""
    result, data, _ = reports[name]
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    words = dict(w.split("=", 1) for w in lines[0].split()[1:])
    assert lines[0].split()[0] == data["verdict"]
    assert int(words["fail"]) == data["counts"]["FAIL"] and int(words["tensors"]) == len(data["comparisons"])
    if name == "fail":
        assert words["first"] == data["divergence"]["key"]
    assert "first divergence" not in result.stdout and "tensors:" in result.stderr
