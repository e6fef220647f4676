"""Help with examples on every command, one error style, and the `rules` listing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cuda2neuron.cli import cli

COMMANDS = ["migrate", "check", "rules", "suppress", "validate", "emulate", "build-backend"]


def test_every_command_is_listed_with_its_whole_summary(run):
    code, out, _ = run("--help")
    assert code == 0
    for name in COMMANDS:
        assert name in out
    assert "..." not in out.split("Commands:")[1]  # click's 45-character cut
    assert "Examples:" in out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_has_examples(name):
    command = cli.get_command(None, name)
    text = command.help or ""
    assert "Examples:" in text, f"{name} --help shows no example"
    assert f"cuda2neuron {name}" in text.split("Examples:")[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("check", "--bogus"), "error: No such option '--bogus'", id="unknown-option"),
        pytest.param(("check", "--output-format", "xml", "."), "error: Invalid value for '--output-format'", id="bad-choice"),
        pytest.param(("nope",), "error: No such command 'nope'", id="unknown-command"),
        pytest.param(("check", "missing.py"), "error: missing.py: path does not exist", id="missing-path"),
        pytest.param(("rules", "CN99"), "error: CN99: no such rule or family", id="unknown-rule"),
        pytest.param(("migrate", "--diff", "--out", "x", "."), "error: --diff and --out exclude each other", id="conflicting-options"),
        pytest.param(("check", "--config", "nope.toml", "."), "error: nope.toml: config file does not exist", id="missing-config"),
    ],
)
def test_one_error_style_and_exit_2(tmp_path, run, args, message):
    code, out, err = run(*args, cwd=tmp_path)
    assert code == 2
    assert err.startswith(message), err
    assert "Usage:" not in err and "Traceback" not in err


def test_rules_lists_a_family(run):
    code, out, _ = run("rules", "CN3", "--output-format", "json")
    assert code == 0
    codes = [r["code"] for r in json.loads(out)]
    assert codes and all(c.startswith("CN3") for c in codes)
    assert "CN301" in codes


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_rules_output_has_no_rest_backticks(run, monkeypatch, fmt):
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = run("rules", "--output-format", fmt)
    assert code == 0
    assert "``" not in out
    assert "`.cuda()`" in out


def test_check_progress_says_checking(tmp_path, run, monkeypatch):
    import cuda2neuron.cli._check as check_module

    seen = []

    def spy(files, config, options, **kw):
        seen.append(kw["verb"])
        return []

    monkeypatch.setattr(check_module, "run_with_progress", spy)
    (tmp_path / "a.py").write_text("x = 1\n")
    run("check", "a.py", cwd=tmp_path)
    assert seen == ["checking"]


# -- issue 44: what the command line names must be a file or a folder, and nothing may hang ----


def _fifo(path):
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "args", "words"),
    [
        pytest.param(lambda d: _fifo(d / "pipe.py"), lambda d: ["check", str(d / "pipe.py")], "not a regular file",
                     id="fifo-named"),
        pytest.param(lambda d: (d / "link.py").symlink_to(d / "a.py"), lambda d: ["check", str(d / "link.py")],
                     "a symlink", id="symlink-named"),
        pytest.param(lambda d: _fifo(d / "base.json"),
                     lambda d: ["check", str(d / "a.py"), "--baseline", str(d / "base.json")],
                     "not a regular file", id="fifo-baseline"),
        pytest.param(lambda d: (d / "base.json").write_text("[" * 100_000 + "]" * 100_000),
                     lambda d: ["check", str(d / "a.py"), "--baseline", str(d / "base.json")],
                     "nested too deeply", id="deep-baseline"),
    ],
)
def test_what_cannot_be_read_is_a_clear_error_never_a_hang(tmp_path, make, args, words):
    (tmp_path / "a.py").write_text("x = y.cuda()\n")
    make(tmp_path)
    done = subprocess.run([sys.executable, "-m", "cuda2neuron", *args(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
