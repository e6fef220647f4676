"""`migrate`: where it writes, what it refuses, and what it reports."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest



def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def test_in_place_rewrites_and_reports_failures_per_file(project, run):
    code, out, err = run("migrate", "pkg", "--report", "r.json", cwd=project)
    assert code == 1  # broken.py failed; the others were processed
    assert (project / "pkg/train.py").read_text() == 'import torch\nmodel = Net().to("neuron")\n'
    assert (project / "pkg/broken.py").read_text().startswith("import torch\nx = y.cuda()")
    report = json.loads((project / "r.json").read_text())
    assert report["summary"]["files_changed"] == 1
    assert report["summary"]["files_failed"] == 1
    assert report["failures"][0]["path"].endswith("broken.py")
    assert report["failures"][0]["line"] == 3
    assert report["edits"][0]["code"] == "CN101"
    assert "broken.py:3" in err


def test_diff_writes_nothing(project, run):
    before = _tree(project)
    code, out, _ = run("migrate", "pkg/train.py", "--diff", cwd=project)
    assert code == 1  # changes printed (ruff / black --diff)
    assert '+model = Net().to("neuron")' in out
    assert _tree(project) == before


def test_out_writes_a_complete_copy_and_leaves_source(project, run, tmp_path):
    before = _tree(project)
    out_dir = tmp_path / "ported"
    code, _, _ = run("migrate", str(project), "--out", str(out_dir))
    assert code == 1  # broken.py
    assert _tree(project) == before
    copy = _tree(out_dir)
    assert copy.pop(".cuda2neuron-port.json")
    assert copy["pkg/train.py"] == b'import torch\nmodel = Net().to("neuron")\n'
    # Untouched files are byte-identical, non-Python files included.
    for name in ("pkg/plain.py", "pkg/broken.py", "notes.txt"):
        assert copy[name] == before[name]
    assert not (out_dir / ".git").exists()


def test_out_must_be_empty(project, run, tmp_path):
    (tmp_path / "ported").mkdir()
    (tmp_path / "ported" / "x").write_text("x")
    code, _, err = run("migrate", str(project), "--out", str(tmp_path / "ported"))
    assert code == 2 and "not empty" in err
    assert (tmp_path / "ported" / "x").read_text() == "x"


def test_out_is_updated_by_the_same_command_while_unchanged(project, run, tmp_path):
    out_dir = tmp_path / "ported"
    run("migrate", str(project), "--out", str(out_dir))
    (project / "pkg" / "more.py").write_text("y = z.cuda()\n")
    code, _, _ = run("migrate", str(project), "--out", str(out_dir))
    assert code == 1  # broken.py, as before
    assert (out_dir / "pkg" / "more.py").read_text() == 'y = z.to("neuron")\n'
    assert (out_dir / "pkg" / "train.py").read_text() == 'import torch\nmodel = Net().to("neuron")\n'


def test_out_with_hand_edits_is_refused_and_kept(project, run, tmp_path):
    out_dir = tmp_path / "ported"
    run("migrate", str(project), "--out", str(out_dir))
    (out_dir / "stale.py").write_text("x = 1\n")
    (out_dir / "pkg" / "plain.py").write_text("x = 2  # my fix\n")
    code, _, err = run("migrate", str(project), "--out", str(out_dir))
    assert code == 2
    assert "pkg/plain.py changed" in err and "stale.py added" in err
    assert (out_dir / "stale.py").read_text() == "x = 1\n"
    assert (out_dir / "pkg" / "plain.py").read_text() == "x = 2  # my fix\n"


@pytest.mark.parametrize(
    ("setup", "flag", "message"),
    [
        pytest.param("dirty", "--allow-dirty", "uncommitted changes", id="dirty-file"),
        pytest.param("untracked", "--allow-dirty", "uncommitted changes", id="untracked-file"),
        pytest.param("no-git", "--allow-no-vcs", "outside a git work tree", id="no-vcs"),
    ],
)
def test_in_place_guards(project, run, setup, flag, message):
    target = project / "pkg" / "train.py"
    if setup == "dirty":
        target.write_text(target.read_text() + "y = z.cuda()\n")
    elif setup == "untracked":
        target = project / "pkg" / "new.py"
        target.write_text("y = z.cuda()\n")
    else:
        import shutil

        shutil.rmtree(project / ".git")
    before = target.read_bytes()
    code, _, err = run("migrate", str(target), cwd=project)
    assert code == 2 and message in err
    assert target.read_bytes() == before  # nothing written
    code, _, _ = run("migrate", str(target), flag, cwd=project)
    assert code == 0
    assert b'.to("neuron")' in target.read_bytes()


def test_read_only_file_is_reported_not_rewritten(project, run):
    target = project / "pkg" / "train.py"
    os.chmod(target, 0o444)
    try:
        code, _, err = run("migrate", "pkg/train.py", cwd=project)
        assert code == 1
        assert "read-only" in err
        assert b".cuda()" in target.read_bytes()
    finally:
        os.chmod(target, 0o644)


def test_mode_bits_are_kept(project, run, gitcmd):
    target = project / "pkg" / "train.py"
    os.chmod(target, 0o755)
    gitcmd(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "mode")
    assert run("migrate", "pkg/train.py", cwd=project)[0] == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


def test_symlinks_are_not_followed_or_written_through(project, run, gitcmd, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("x = y.cuda()\n")
    (project / "pkg" / "link.py").symlink_to(outside)
    gitcmd(project, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    gitcmd(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "link")
    code, _, err = run("migrate", "pkg", cwd=project)
    assert outside.read_text() == "x = y.cuda()\n"
    assert "symlink" in err


def test_missing_path_is_a_usage_error(project, run):
    code, _, err = run("migrate", "nope", cwd=project)
    assert code == 2 and "nope" in err and "does not exist" in err


def test_markdown_report_lists_manual_actions_and_edits(project, run):
    code, _, _ = run("migrate", "pkg/train.py", "--report", "r.md", cwd=project)
    text = (project / "r.md").read_text()
    assert "| `pkg/train.py:2` | CN101 cuda-method-call | safe |" in text


def test_bad_report_extension(project, run):
    code, _, err = run("migrate", "pkg", "--report", "r.txt", cwd=project)
    assert code == 2 and ".md, .json, .sarif or .html" in err


def test_second_run_changes_nothing(project, run, gitcmd):
    run("migrate", "pkg/train.py", cwd=project)
    gitcmd(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "ported")
    before = _tree(project)
    code, _, err = run("migrate", "pkg/train.py", cwd=project)
    assert code == 0 and _tree(project) == before
    assert "0 changed" in err


def test_ctrl_c_while_writing_says_how_many_files_were_written(tmp_path, run_cli, monkeypatch):
    from cuda2neuron.workspace import _output

    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(f"x{i} = y.cuda()\n")
    real = _output.atomic_write
    calls = []

    def write_then_interrupt(path, data):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(path, data)

    monkeypatch.setattr(_output, "atomic_write", write_then_interrupt)
    code, _, err = run_cli("migrate", str(tmp_path), "--allow-no-vcs", "--no-cache")
    assert code == 130
    assert "1 of 3 file(s) already written" in err
