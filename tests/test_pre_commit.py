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


def test_readme_snippet_works_as_written(tmp_path, env):
    """The README's `.pre-commit-config.yaml`, copied as written, against a clone of this
    repository (the README: from a clone, `repo:` is its path). Its `rev:` is a release tag
    (issue 31: the snippet named a tag that did not exist, and pre-commit failed with exit 3)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    snippet = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    (repo_url,) = re.findall(r"^\s*- repo:\s*(\S+)", snippet, re.M)
    (rev,) = re.findall(r"^\s*rev:\s*(\S+)", snippet, re.M)
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    clone = tmp_path / "cuda2neuron"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True)
    tags = subprocess.run(["git", "-C", str(clone), "tag", "--list"], capture_output=True, text=True).stdout.split()
    shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"], capture_output=True,
                             text=True).stdout.strip() == "true"
    if rev not in tags:
        # Only a shallow checkout (CI's) may lack the release tag: then the release step, on
        # this commit. A full history without it is the bug (tests/test_project_meta.py too).
        assert shallow, f"{rev} is not a tag of this repository (docs/releasing.md)"
        _git(clone, "tag", "-a", rev, "-m", f"cuda2neuron {rev}")
    user = tmp_path / "user-repo"
    user.mkdir()
    _git(user, "init", "-q")
    (user / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (user / ".pre-commit-config.yaml").write_text(snippet.replace(repo_url, str(clone)))
    _git(user, "add", "-A")
    result = subprocess.run([PRE_COMMIT, "run", "--all-files"], cwd=user, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr  # the hook ran and found the CUDA-ism
    assert "cuda2neuron check" in result.stdout and "CN101" in result.stdout, result.stdout
    (user / "train.py").write_text("import torch\nmodel = Net()\n")
    clean = subprocess.run([PRE_COMMIT, "run", "--all-files"], cwd=user, env=env, capture_output=True, text=True,
                           timeout=600)
    assert clean.returncode == 0, clean.stdout + clean.stderr
