"""The in-place guard fails closed: a file is rewritten only when git positively says it is clean."""

from __future__ import annotations

import pytest


def _corrupt_index(project, gitcmd):
    (project / ".git" / "index").write_bytes(b"DIRC garbage, not an index")


def _skip_worktree(project, gitcmd):
    target = project / "pkg" / "train.py"
    gitcmd(project, "update-index", "--skip-worktree", "pkg/train.py")
    target.write_text(target.read_text() + "y = z.cuda()\n")  # a change git status will not show


def _assume_unchanged(project, gitcmd):
    target = project / "pkg" / "train.py"
    gitcmd(project, "update-index", "--assume-unchanged", "pkg/train.py")
    target.write_text(target.read_text() + "y = z.cuda()\n")


def _ignored_and_untracked(project, gitcmd):
    (project / ".gitignore").write_text("pkg/train.py\n")
    gitcmd(project, "rm", "-q", "--cached", "pkg/train.py")
    gitcmd(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "untrack")


def _bad_head(project, gitcmd):
    (project / ".git" / "HEAD").write_text("ref: refs/heads/nonexistent\n")
    (project / ".git" / "objects").rename(project / ".git" / "objects-gone")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        pytest.param(_corrupt_index, "git cannot tell", id="corrupt-index"),
        pytest.param(_skip_worktree, "skip-worktree", id="skip-worktree"),
        pytest.param(_assume_unchanged, "assume-unchanged", id="assume-unchanged"),
        pytest.param(_ignored_and_untracked, "untracked", id="ignored-file-named"),
        pytest.param(_bad_head, "refusing to rewrite", id="objects-missing"),
    ],
)
def test_a_file_git_cannot_vouch_for_is_not_rewritten(project, run, gitcmd, setup, message):
    setup(project, gitcmd)
    target = project / "pkg" / "train.py"
    before = target.read_bytes()
    code, _, err = run("migrate", "pkg/train.py", cwd=project)
    assert code == 2 and message in err, err
    assert "Traceback" not in err
    assert target.read_bytes() == before
    # Both overrides together still go past it: the user accepts there may be no way back.
    code, _, err = run("migrate", "pkg/train.py", "--allow-dirty", "--allow-no-vcs", cwd=project)
    assert code == 0, err
    assert b'.to("neuron")' in target.read_bytes()


def test_the_corrupt_index_message_is_gits_own(project, run, gitcmd):
    _corrupt_index(project, gitcmd)
    code, _, err = run("migrate", "pkg/train.py", "--allow-dirty", cwd=project)
    assert code == 2
    assert "index" in err.lower()  # git's words about its index, not a guess of ours


def test_the_guard_never_runs_the_repositorys_fsmonitor_hook(project, run, gitcmd, tmp_path):
    """core.fsmonitor names a program `git status` runs: a cloned tree's config ran it (issue 44)."""
    ran = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    gitcmd(project, "config", "core.fsmonitor", str(hook))
    code, _, err = run("migrate", "pkg/train.py", cwd=project)
    assert code == 0, err
    assert not ran.exists()
