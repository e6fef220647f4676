"""The hooks, run by the real `pre-commit` tool against a temporary git repository.

`pre-commit try-repo` installs this checkout (working tree included) into pre-commit's own
environment, exactly as a user's hook would be; it must work without torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")

pytestmark = [
    pytest.mark.slow,  # each test installs this checkout into pre-commit's environment (10-15 s)
    pytest.mark.skipif(not Path(PRE_COMMIT).exists(), reason="pre-commit is a test dependency"),
]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("pre-commit-home")
    e = dict(os.environ)
    e["PRE_COMMIT_HOME"] = str(home)
    e.pop("VIRTUAL_ENV", None)
    return e


def _try_repo(repo: Path, hook: str, env, *files: str):
    cmd = [PRE_COMMIT, "try-repo", str(ROOT), hook, "--verbose"]
    cmd += ["--files", *files] if files else ["--all-files"]
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "user-repo"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (r / "clean.py").write_text("x = 1\n")
    _git(r, "add", "-A")
    return r


def test_check_hook_fails_on_cuda_and_passes_clean(repo, env):
    bad = _try_repo(repo, "cuda2neuron-check", env, "train.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "CN101" in bad.stdout
    good = _try_repo(repo, "cuda2neuron-check", env, "clean.py")
    assert good.returncode == 0, good.stdout + good.stderr


def test_fix_hook_rewrites(repo, env):
    result = _try_repo(repo, "cuda2neuron-fix", env, "train.py")
    assert result.returncode == 1  # it modified a file: pre-commit convention is to fail
    assert (repo / "train.py").read_text() == 'import torch\nmodel = Net().to("neuron")\n'


def test_hook_with_no_matching_files(repo, env):
    (repo / "README.md").write_text("cuda\n")
    _git(repo, "add", "-A")
    result = _try_repo(repo, "cuda2neuron-check", env, "README.md")
    assert result.returncode == 0, result.stdout + result.stderr
