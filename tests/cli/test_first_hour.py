"""A new user's first hour, through the real `cuda2neuron` binary (issue 31): what the README
promises about install errors, exit codes, the default path, colour and the numbers of the
summary. Each case is one process start (a few tenths of a second); the projects are shared.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

BINARY = Path(sys.executable).parent / "cuda2neuron"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Environment variables that change colour or the pre-commit reading of an empty PATHS list.
_QUIET_ENV = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "PRE_COMMIT", "CLICOLOR_FORCE")

# One safe fix (CN101), one unsafe fix (CN205), one manual action (CN104's display-only test
# in front of a kernel), one typo in a suppression comment.
TRAIN = (
    "import torch\n"
    "model = Net().cuda()\n"
    "torch.backends.cudnn.benchmark = True\n"
    "if model.is_cuda:\n"
    "    y = ext.fused(model)\n"
    "z = w.cuda()  # cuda2neuron: ignore[CN1O1]\n"
)


def cli(*args: str, cwd: Path, tty: bool = False, **env: str) -> tuple[int, str, str]:
    """Run the installed console script; ``tty``: stdout is a terminal (a pseudo-terminal)."""
    environ = {k: v for k, v in os.environ.items() if k not in _QUIET_ENV}
    environ.update(env)
    if not tty:
        p = subprocess.run([str(BINARY), *args], cwd=cwd, capture_output=True, text=True, env=environ, timeout=120)
        return p.returncode, p.stdout, p.stderr
    leader, follower = pty.openpty()
    try:
        p = subprocess.run([str(BINARY), *args], cwd=cwd, stdout=follower, stderr=subprocess.PIPE, text=True,
                           env=dict(environ, TERM="xterm-256color"), timeout=120)
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not data:
                break
            chunks.append(data)
        return p.returncode, b"".join(chunks).decode(), p.stderr
    finally:
        os.close(leader)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("first-hour")
    (root / "pkg").mkdir()
    (root / "pkg" / "train.py").write_text(TRAIN)
    (root / "pkg" / "plain.py").write_text("x = 1\n")
    (root / "pkg" / "util.py").write_text("def f():\n    return 2\n")
    return root


# -- 1: validate without the [validate] extra ------------------------------------------------
@pytest.fixture(scope="module")
def no_torch(tmp_path_factory) -> Path:
    """A venv with every package of this one but torch: the console script, re-pointed at it."""
    venv = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    import sysconfig

    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.split("-")[0] in ("torch", "functorch", "torchgen") or entry.name == "__pycache__":
            continue
        (site / entry.name).symlink_to(entry)
    script = venv / "bin" / "cuda2neuron"
    lines = BINARY.read_text().splitlines(keepends=True)
    script.write_text(f"#!{venv / 'bin' / 'python'}\n" + "".join(lines[1:]))
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("validate", "a", "b", "--entry", "m:build"), id="validate"),
        pytest.param(("emulate", "--", "python", "-c", "1"), id="emulate"),
        pytest.param(("build-backend",), id="build-backend"),
    ],
)
def test_commands_that_need_torch_say_what_to_install(no_torch, tmp_path, args):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    p = subprocess.run([str(no_torch), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    # 2 is a setup error; 1 would tell CI that the port fails.
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "torch, which is not installed here" in p.stderr
    assert 'pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in p.stderr


def test_the_rewrite_path_works_without_torch(no_torch, project):
    p = subprocess.run([str(no_torch), "check", "pkg/plain.py"], cwd=project, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


# -- 3 and 7: the summary's numbers match its tables; nothing is claimed done that is not ------
@pytest.fixture(scope="module")
def migrated(project) -> str:
    code, _, err = cli("migrate", "--diff", "pkg", cwd=project)
    assert code == 1, err  # --diff with changes
    return err


def _table_rows(err: str, title: str) -> int:
    """Rows of the rich table titled ``title``: lines that start with a ``path:line`` cell."""
    block = err.split(title, 1)[1]
    block = re.split(r"\n(?=[A-Za-z])", block, maxsplit=1)[0]  # up to the next title
    return len(re.findall(r"^\s*pkg/\S+:\d+", block, re.M))


def test_summary_counts_are_the_lengths_of_their_tables(migrated):
    head = migrated.splitlines()[0]
    manual = int(re.search(r"(\d+) manual action", head).group(1))
    unsafe = int(re.search(r"(\d+) more fixable with --unsafe-fixes", head).group(1))
    assert (manual, unsafe) == (2, 1), head  # CN104 and the typo's CN901; CN205
    assert f"Manual actions ({manual})" in migrated and _table_rows(migrated, f"Manual actions ({manual})") == manual
    title = f"Unsafe fixes to review ({unsafe})"
    assert title in migrated and _table_rows(migrated, title) == unsafe
    # Hours, with a band that tells a day from a week; never "points". CN104 (medium) 1 h, the
    # typo (low) 15 min, the unsafe fix's review 15 min.
    assert "effort left: ~1.5 h (medium: up to a day)" in head, head
    assert "points" not in migrated


def test_a_typo_in_a_suppression_is_reported_and_the_file_still_migrated(migrated):
    assert "unknown rule code CN1O1 in a suppression" in migrated  # (the table wraps the rest)
    assert "failed" not in migrated.split("\n", 1)[1]  # no file failed (only "0 failed" in the headline)
    assert ", 0 failed" in migrated.splitlines()[0]
    assert "2 edits" in migrated.splitlines()[0]  # both .cuda() calls, the typo's line too


def test_a_failed_file_is_never_summarised_as_nothing_left(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = y.cuda(\n")
    code, _, err = cli("migrate", "--diff", "a.py", cwd=tmp_path)
    assert code == 1
    head = err.splitlines()[0]
    assert "nothing CUDA-specific left" not in err and "1 file(s) not processed" in head, head
    assert "not counting 1 failed file(s)" in head


def test_closing_line_counts_files_with_findings_apart_from_files_checked(project):
    code, _, err = cli("check", "pkg", cwd=project)
    assert code == 1
    assert err.splitlines()[-1].startswith("5 finding(s) in 1 file(s) (3 checked);"), err.splitlines()[-1]


# -- 8: ruff's conventions --------------------------------------------------------------------
def test_fix_that_fixed_everything_exits_0(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = y.cuda()\n")
    assert cli("check", "--fix", "a.py", cwd=tmp_path)[0] == 0
    assert 'y.to("neuron")' in (tmp_path / "a.py").read_text()
    (tmp_path / "b.py").write_text("import torch\nx = y.cuda()\n")
    assert cli("check", "--fix", "--exit-non-zero-on-fix", "b.py", cwd=tmp_path)[0] == 1
    (tmp_path / "c.py").write_text("import torch\nx = y.cuda()\nif x.is_cuda:\n    z = ext.fused(x)\n")
    assert cli("check", "--fix", "c.py", cwd=tmp_path)[0] == 1  # a manual finding remains


@pytest.mark.parametrize(
    ("args", "env", "code", "said"),
    [
        pytest.param((), {}, 1, "5 finding(s) in 1 file(s) (3 checked)", id="no-path-is-the-current-folder"),
        pytest.param(("--from-pre-commit",), {}, 0, "no files to check", id="our-hooks-empty-list"),
        pytest.param((), {"PRE_COMMIT": "1"}, 0, "no files to check", id="any-pre-commit-hook-empty-list"),
    ],
)
def test_check_without_paths(project, args, env, code, said):
    result = cli("check", *args, cwd=project / "pkg", **env)
    assert result[0] == code, result[2]
    assert said in result[2]


@pytest.mark.parametrize(
    ("tty", "env", "coloured"),
    [
        pytest.param(True, {}, True, id="terminal"),
        pytest.param(False, {"FORCE_COLOR": "1"}, True, id="force-color-into-a-pipe"),
        pytest.param(True, {"NO_COLOR": "1"}, False, id="no-color-on-a-terminal"),
        pytest.param(False, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, id="no-color-beats-force-color"),
        pytest.param(False, {}, False, id="pipe"),
    ],
)
def test_findings_are_coloured_for_people_only(project, tty, env, coloured):
    _, out, _ = cli("check", "--output-format", "concise", "pkg/train.py", cwd=project, tty=tty, **env)
    assert bool(ANSI.search(out)) is coloured, out[:300]
    assert "pkg/train.py:2:9: CN101" in ANSI.sub("", out)  # the same text either way
