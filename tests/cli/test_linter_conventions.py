"""What a ruff user expects of `check` and `migrate`: no silent misconfiguration, honest fix
availability, the usual flags, a baseline, next steps after a port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda2neuron.kinds import catalog, known_codes
from cuda2neuron.report import OUTPUT_FORMATS

CUDA = "import torch\nx = torch.zeros(3).cuda()\n"
# one safe fix (CN101), one display-only CN104 (the branch calls a CUDA kernel)
MIXED = "import torch\nx = torch.zeros(3).cuda()\nif x.is_cuda:\n    y = ext.fused(x)\n"


def test_known_codes_are_the_catalog():
    # Read from the catalog's file names (no rule imported); must be exactly the registered rules.
    assert known_codes() == frozenset(catalog())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--select", "XYZ"), "--select: unknown rule code(s) XYZ", id="select-garbage"),
        pytest.param(("--select", "CN99"), "--select: unknown rule code(s) CN99", id="select-unknown-family"),
        pytest.param(("--select", "CN1,CN199"), "unknown rule code(s) CN199", id="select-one-bad-of-two"),
        pytest.param(("--ignore", "CN0"), "--ignore: unknown rule code(s) CN0", id="ignore-unknown"),
        pytest.param(("--ignore", "CN"), "no rule is selected", id="ignore-everything"),
        pytest.param(("--select", "CN1", "--ignore", "CN1"), "no rule is selected", id="select-and-ignore-cancel"),
    ],
)
def test_unknown_or_empty_selection_is_a_usage_error(tmp_path, run, args, message):
    (tmp_path / "a.py").write_text(CUDA)
    code, _, err = run("check", *args, "a.py", cwd=tmp_path)
    assert code == 2
    assert err.startswith("error: ") and message in err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--select", "cn1"), id="lower-case"),
        pytest.param(("--select", "CN"), id="everything"),
        pytest.param(("--select", "CN101"), id="one-code"),
        pytest.param(("--ignore", "CN1", "--select", "CN101"), id="specific-select-beats-ignore"),
    ],
)
def test_known_selection_runs(tmp_path, run, args):
    (tmp_path / "a.py").write_text(CUDA)
    code, out, _ = run("check", *args, "a.py", cwd=tmp_path)
    assert code == 1 and "CN101" in out


@pytest.mark.parametrize(
    ("table", "where"),
    [
        pytest.param('select = ["CN1", "CN99"]', "[tool.cuda2neuron].select: unknown rule code(s) CN99", id="select"),
        pytest.param('ignore = ["XY1"]', "[tool.cuda2neuron].ignore: unknown rule code(s) XY1", id="ignore"),
        pytest.param(
            '[tool.cuda2neuron.per-file-ignores]\n"tests/*" = ["CN1", "CN0"]',
            "[tool.cuda2neuron].per-file-ignores.'tests/*': unknown rule code(s) CN0",
            id="per-file-ignores",
        ),
    ],
)
def test_unknown_codes_in_config_name_the_file(tmp_path, run, table, where):
    header = "" if table.startswith("[") else "[tool.cuda2neuron]\n"
    (tmp_path / "pyproject.toml").write_text(header + table + "\n")
    (tmp_path / "a.py").write_text(CUDA)
    code, _, err = run("check", "a.py", cwd=tmp_path)
    assert code == 2
    assert f"error: {tmp_path / 'pyproject.toml'}: {where}" in err


def _config_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "scripts").mkdir(parents=True)
    (root / "pkg" / "scripts").mkdir(parents=True)
    (root / "gen").mkdir()
    (root / "pyproject.toml").write_text(
        '[tool.cuda2neuron]\nexclude = ["gen/"]\n[tool.cuda2neuron.per-file-ignores]\n"scripts/*" = ["CN1"]\n'
    )
    for rel in ("scripts/run.py", "pkg/scripts/run.py", "gen/out.py", "pkg/train.py"):
        (root / rel).write_text(CUDA)
    return root


@pytest.mark.parametrize(
    ("cwd", "target"),
    [
        pytest.param(".", ".", id="from-the-project-root"),
        pytest.param("pkg", "..", id="from-a-subfolder"),
        pytest.param("..", "proj", id="from-outside"),
    ],
)
def test_config_paths_are_relative_to_the_config_file(tmp_path, run, cwd, target):
    root = _config_project(tmp_path)
    code, out, _ = run("check", "--output-format", "json", target, cwd=(root / cwd).resolve())
    assert code == 1
    data = json.loads(out)
    reported = sorted(
        Path(f["path"]).resolve().relative_to(root.resolve()).as_posix()
        for f in data["fixable"] + data["manual_actions"]
    )
    # "scripts/*" is anchored at the config's folder (pkg/scripts is not ignored); gen/ excluded.
    assert reported == ["pkg/scripts/run.py", "pkg/train.py"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param((), "[fixable: --fix]", id="safe-fix-says-fix"),
        pytest.param((), "[no automatic fix]", id="display-only-promises-nothing"),
        pytest.param((), "suggested, to apply by hand: x.is_neuron", id="display-only-shows-suggestion"),
        pytest.param(("--show-fixes",), "fix (safe):", id="show-fixes-shows-the-fix"),
    ],
)
def test_fix_availability_is_honest(tmp_path, run, args, expected):
    (tmp_path / "a.py").write_text(MIXED)
    code, out, err = run("check", *args, "a.py", cwd=tmp_path)
    assert code == 1
    assert expected in out
    assert "unsafe-fixes)" not in out  # no display-only finding promises --unsafe-fixes
    assert "1 fixable with --fix" in err and "1 need a person" in err


def test_unsafe_fixes_do_not_apply_display_only_fixes(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text(MIXED)
    code, out, err = run("check", "--fix", "--unsafe-fixes", "a.py", cwd=tmp_path)
    assert code == 1
    assert "if x.is_cuda:" in f.read_text()  # the display-only one is still there
    # Only what is left is listed after --fix (ruff); the closing line counts both.
    assert "CN101" not in out and "[no automatic fix]" in out
    assert "fixed 1, 1 remaining" in err


def test_fix_with_show_fixes_marks_fixed_findings(tmp_path, run):
    (tmp_path / "a.py").write_text(MIXED)
    _, out, _ = run("check", "--fix", "--show-fixes", "a.py", cwd=tmp_path)
    assert "CN101 `.cuda()` places the tensor on a CUDA device [fixed]" in out


@pytest.mark.parametrize(
    ("args", "code", "out_has", "err_has"),
    [
        pytest.param(("--exit-zero",), 0, "CN101", "finding(s)", id="exit-zero"),
        pytest.param(("-q",), 1, "CN101", None, id="quiet-prints-findings-only"),
        pytest.param(("--statistics",), 1, "CN101  cuda-method-call (1 fixable)", "finding(s)", id="statistics"),
        pytest.param(("--diff",), 1, '+x = torch.zeros(3).to("neuron")', "would be changed", id="diff-exits-1"),
    ],
)
def test_check_flags(tmp_path, run, args, code, out_has, err_has):
    (tmp_path / "a.py").write_text(MIXED)
    got, out, err = run("check", *args, "a.py", cwd=tmp_path)
    assert got == code
    assert out_has in out
    if err_has is None:
        assert err == ""
    else:
        assert err_has in err
    assert (tmp_path / "a.py").read_text() == MIXED  # none of these writes


def test_diff_of_a_clean_file_exits_0(tmp_path, run):
    (tmp_path / "a.py").write_text("x = 1\n")
    assert run("check", "--diff", "a.py", cwd=tmp_path)[0] == 0
    assert run("migrate", "--diff", "a.py", cwd=tmp_path)[0] == 0


@pytest.mark.parametrize("fmt", OUTPUT_FORMATS)
def test_output_file_gets_the_chosen_format(tmp_path, run, fmt):
    (tmp_path / "a.py").write_text(CUDA)
    code, out, _ = run("check", "--output-format", fmt, "--output-file", "report.out", "a.py", cwd=tmp_path)
    assert code == 1 and out == ""
    written = (tmp_path / "report.out").read_text()
    # Every format names the finding; the ones that are JSON parse.
    assert "CN101" in written
    if fmt in ("json", "sarif", "gitlab"):
        json.loads(written)
    if fmt == "json-lines":
        [json.loads(line) for line in written.splitlines()]


def test_baseline_hides_known_findings_and_fails_on_new_ones(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text(CUDA)
    code, _, err = run("check", "--write-baseline", "base.json", "a.py", cwd=tmp_path)
    assert code == 0 and "wrote 1 finding(s)" in err
    assert run("check", "--baseline", "base.json", "a.py", cwd=tmp_path)[0] == 0
    # Lines added above a known finding do not make it new.
    f.write_text("# header\n\n" + CUDA)
    code, out, err = run("check", "--baseline", "base.json", "a.py", cwd=tmp_path)
    assert code == 0 and out == "" and "1 known in the baseline" in err
    # A second copy of the same line is new.
    f.write_text(CUDA + "x = torch.zeros(3).cuda()\n")
    code, out, _ = run("check", "--baseline", "base.json", "--output-format", "concise", "a.py", cwd=tmp_path)
    assert code == 1 and out.count("CN101") == 1 and "a.py:3:" in out
    # The baseline means the same from another working folder.
    sub = tmp_path / "sub"
    sub.mkdir()
    assert run("check", "--baseline", "../base.json", "../a.py", cwd=sub)[0] == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "baseline file does not exist", id="missing"),
        pytest.param("{", "not JSON", id="not-json"),
        pytest.param('{"a": 1}', "not a cuda2neuron baseline", id="other-json"),
        pytest.param('{"tool": "cuda2neuron", "version": 9, "findings": []}', "baseline version 9", id="future-version"),
    ],
)
def test_bad_baseline_is_a_usage_error(tmp_path, run, content, message):
    (tmp_path / "a.py").write_text(CUDA)
    if content is not None:
        (tmp_path / "base.json").write_text(content)
    code, _, err = run("check", "--baseline", "base.json", "a.py", cwd=tmp_path)
    assert code == 2 and f"error: base.json: {message}" in err


def test_migrate_out_inside_the_source_is_never_scanned_again(project, run):
    code, _, first = run("migrate", ".", "--out", "out", cwd=project)
    assert code == 1  # broken.py fails, the rest is written
    assert (project / "out" / "pkg" / "train.py").is_file()
    # A later scan of the source does not read the copy; the copy itself can still be checked.
    _, out, _ = run("check", "--output-format", "json", ".", cwd=project)
    paths = {f["path"] for f in json.loads(out)["fixable"] + json.loads(out)["manual_actions"]}
    assert paths and not any(p.startswith("out") for p in paths)
    code, out, _ = run("check", "--output-format", "json", "out", cwd=project)
    assert json.loads(out)["summary"]["files_scanned"] >= 2
    # Running the same migrate again replaces the copy instead of porting it.
    code, _, again = run("migrate", ".", "--out", "out", cwd=project)
    assert again.split(" files scanned")[0] == first.split(" files scanned")[0]
    assert not (project / "out" / "out").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(("--diff",), "review the diff above, then write it: cuda2neuron migrate pkg/train.py", id="diff"),
        pytest.param(("--out", "../port"), "prove it: cuda2neuron validate pkg/train.py ../port", id="out"),
        pytest.param((), "prove the port: cuda2neuron validate pkg/train.py --rev <pre-port ref>", id="in-place"),
    ],
)
def test_migrate_ends_with_next_steps(project, run, args, expected):
    _, _, err = run("migrate", "pkg/train.py", *args, cwd=project)
    assert "Next steps:" in err
    assert expected in err


def test_finished_port_does_not_say_coverage_zero(project, run):
    run("migrate", "pkg/train.py", "pkg/plain.py", cwd=project)
    _, _, err = run("migrate", "pkg/train.py", "pkg/plain.py", "--allow-dirty", cwd=project)
    assert "coverage 0%" not in err
    assert "nothing CUDA-specific left" in err
    assert "left: nothing" in err


def test_manual_actions_are_counted_by_effort(tmp_path, run):
    (tmp_path / "a.py").write_text(MIXED)
    _, _, err = run("migrate", "--diff", "a.py", cwd=tmp_path)
    assert "1 manual action ·" in err and "coverage 50%" in err
    assert "left: 1 manual action(s) (1 medium); effort ~1 h (low: up to an hour)" in err
    assert "effort left: ~1 h (low: up to an hour)" in err


@pytest.mark.parametrize(
    ("source", "closing"),
    [
        pytest.param(CUDA, "1 finding(s) in 1 file(s) (1 checked); 1 fixable with --fix", id="safe"),
        pytest.param(
            "import torch\ntorch.backends.cudnn.allow_tf32 = True\n",
            "fixable with --fix --unsafe-fixes",
            id="unsafe-only",
        ),
        pytest.param("x = 1\n", "0 finding(s) in 0 file(s) (1 checked)", id="clean"),
    ],
)
def test_closing_line_counts_what_the_flags_fix(tmp_path, run, source, closing):
    (tmp_path / "a.py").write_text(source)
    _, _, err = run("check", "a.py", cwd=tmp_path)
    assert closing in err.splitlines()[-1]
    assert "0 fixable" not in err
