"""The hooks, run by the real `pre-commit` tool against a temporary git repository.

A snapshot of this checkout (working tree included, as `pre-commit try-repo` would take it) is
committed to a temporary repository once; every test's user repository names it in its
`.pre-commit-config.yaml`, so pre-commit installs it into its own environment once for the
module (each `try-repo` call installed it again: 10-15 s each). It must work without torch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")

pytestmark = [
    pytest.mark.slow,  # pre-commit installs a checkout into its own environment (10-15 s each)
    pytest.mark.skipif(not Path(PRE_COMMIT).exists(), reason="pre-commit is a test dependency"),
]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("pre-commit-home")
    e = dict(os.environ)
    e["PRE_COMMIT_HOME"] = str(home)
    e.pop("VIRTUAL_ENV", None)
    return e


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> tuple[Path, str]:
    """(repository, commit): this checkout's files as they are now, committed."""
    repo = tmp_path_factory.mktemp("cuda2neuron-snapshot")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True)
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            src = ROOT / name
            if src.is_file():
                (repo / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, repo / name)
    else:  # not a git checkout (an sdist): everything but build products
        shutil.copytree(ROOT, repo, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".venv", "*.egg-info", "__pycache__", ".pytest_cache", "*.so"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "snapshot")
    return repo, _git(repo, "rev-parse", "HEAD").strip()


def _config(snapshot: tuple[Path, str], extra: str = "") -> str:
    repo, rev = snapshot
    return (f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n"
            f"      - id: cuda2neuron-check\n{extra}      - id: cuda2neuron-fix\n")


def _run(repo: Path, hook: str, env, *files: str):
    cmd = [PRE_COMMIT, "run", hook, "--verbose"]
    cmd += ["--files", *files] if files else ["--all-files"]
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def repo(tmp_path, snapshot):
    r = tmp_path / "user-repo"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (r / "clean.py").write_text("x = 1\n")
    (r / ".pre-commit-config.yaml").write_text(_config(snapshot))
    _git(r, "add", "-A")
    return r


def test_check_hook_fails_on_cuda_and_passes_clean(repo, env):
    bad = _run(repo, "cuda2neuron-check", env, "train.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "CN101" in bad.stdout
    good = _run(repo, "cuda2neuron-check", env, "clean.py")
    assert good.returncode == 0, good.stdout + good.stderr


def test_fix_hook_rewrites(repo, env):
    result = _run(repo, "cuda2neuron-fix", env, "train.py")
    # `check --fix` exits 0 once everything is fixed (ruff); pre-commit fails the hook because
    # it changed a file.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "files were modified by this hook" in result.stdout
    assert (repo / "train.py").read_text() == 'import torch\nmodel = Net().to("neuron")\n'


def test_hook_with_no_matching_files(repo, env, snapshot):
    (repo / "README.md").write_text("cuda\n")
    _git(repo, "add", "-A")
    result = _run(repo, "cuda2neuron-check", env, "README.md")
    assert result.returncode == 0, result.stdout + result.stderr
    # Forced to run with no files (always_run): nothing to check, never the whole repository,
    # though `cuda2neuron check` with no PATHS checks the current folder.
    (repo / ".pre-commit-config.yaml").write_text(_config(snapshot).replace(
        "      - id: cuda2neuron-check\n", "      - id: cuda2neuron-check\n        always_run: true\n"))
    _git(repo, "add", "-A")
    forced = _run(repo, "cuda2neuron-check", env, "README.md")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "no files to check" in forced.stdout


def _readme_snippets() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)


def _user_repo(tmp_path: Path, config: str) -> Path:
    user = tmp_path / "user-repo"
    user.mkdir()
    _git(user, "init", "-q")
    (user / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (user / ".pre-commit-config.yaml").write_text(config)
    _git(user, "add", "-A")
    return user


def _commit(user: Path, env) -> subprocess.CompletedProcess[str]:
    """`git commit` through the installed hook, as a user commits."""
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "change"], cwd=user,
                          env=env, capture_output=True, text=True, timeout=600)


def test_readme_local_snippet_works_as_written(tmp_path, env):
    """The README's first snippet, copied as written: a `repo: local` hook running the installed
    cuda2neuron, in a repository with no tags and no network (issue 43: the snippet's `rev:` named
    a tag a clone did not have). It reads what `check` reads: a JSON config naming cuda fails the
    commit (the old `types_or` never passed it)."""
    (snippet, _remote) = _readme_snippets()
    local_env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"}  # the installed tool
    user = _user_repo(tmp_path, snippet)
    result = subprocess.run([PRE_COMMIT, "run", "--all-files"], cwd=user, env=local_env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr  # the hook ran and found the CUDA-ism
    assert "cuda2neuron check" in result.stdout and "CN101" in result.stdout, result.stdout
    (user / "train.py").write_text("import torch\nmodel = Net()\n")
    _git(user, "add", "-A")
    subprocess.run([PRE_COMMIT, "install"], cwd=user, env=local_env, check=True, capture_output=True)
    clean = _commit(user, local_env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (user / "conf").mkdir()
    (user / "conf" / "train.json").write_text('{"device": "cuda", "lr": 0.1}\n')
    _git(user, "add", "-A")
    refused = _commit(user, local_env)
    said = refused.stdout + refused.stderr  # git prints the hook's output on stderr
    assert refused.returncode == 1 and "CN731" in said and "conf/train.json" in said, said


def test_readme_remote_snippet_works_at_a_commit_sha(tmp_path, env, snapshot):
    """The README's second snippet, the hooks installed by pre-commit from this repository: its
    `rev:` a commit SHA, as the README says for a clone without tags (the snapshot has none)."""
    (_local, remote) = _readme_snippets()
    (repo_url,) = re.findall(r"^\s*- repo:\s*(\S+)", remote, re.M)
    (rev,) = re.findall(r"^\s*rev:\s*(\S+)", remote, re.M)
    repo, sha = snapshot
    assert not _git(repo, "tag", "--list").split()
    user = _user_repo(tmp_path, "repos:\n" + remote.replace(repo_url, str(repo)).replace(rev, sha, 1))
    (user / "setup.cfg").write_text("[train]\ndevice = cuda\n")
    _git(user, "add", "-A")
    result = subprocess.run([PRE_COMMIT, "run", "--all-files"], cwd=user, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "CN101" in result.stdout and "setup.cfg" in result.stdout, result.stdout
