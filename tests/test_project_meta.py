"""The project's own metadata agrees with itself: LICENSE, CHANGELOG, the pre-commit `rev:` and
the install lines in the README (a release bumps them together; see README "pre-commit")."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 CI leg
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def _releases(text: str) -> list[str]:
    return re.findall(r"^## \[(\d+\.\d+\.\d+)\]", text, re.M)


def test_precommit_rev_is_the_version_tag():
    revs = re.findall(r"^\s*rev:\s*(\S+)", README, re.M)
    assert revs == [f"v{VERSION}"], revs


def test_changelog_newest_release_is_the_version():
    assert CHANGELOG.startswith("# Changelog\n")
    assert "## [Unreleased]" in CHANGELOG  # Keep a Changelog: changes land here first
    releases = _releases(CHANGELOG)
    assert releases and releases[0] == VERSION, releases
    as_tuples = [tuple(map(int, r.split("."))) for r in releases]
    assert as_tuples == sorted(as_tuples, reverse=True) and len(set(as_tuples)) == len(as_tuples)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        pytest.param(CHANGELOG, True, id="ours"),
        pytest.param("## [0.1.0]\n### Added\n### New stuff\n", False, id="unknown-kind-of-change"),
    ],
)
def test_changelog_uses_only_keep_a_changelog_sections(text, ok):
    # Every "### " heading is one of Keep a Changelog's six kinds of change.
    headings = set(re.findall(r"^### (.+)$", text, re.M))
    assert (headings <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}) is ok


def test_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["project"]["license"] == "Apache-2.0"  # an SPDX expression (PEP 639)
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    for phrase in (
        "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
        "2. Grant of Copyright License.",
        "3. Grant of Patent License.",
        "9. Accepting Warranty or Additional Liability.",
        "END OF TERMS AND CONDITIONS",
        "http://www.apache.org/licenses/LICENSE-2.0",
    ):
        assert phrase in text
    # The standard text, unmodified (its digest is the one apache.org publishes the file with).
    import hashlib

    assert hashlib.md5(text.encode("utf-8")).hexdigest() == "3b83ef96387f14655fc854ddc3c6bd57"


def test_readme_install_lines_take_the_tested_torch_from_the_cpu_index():
    pins = set(re.findall(r'"torch==([\d.]+)"', README))
    assert len(pins) == 1, pins  # one torch everywhere in the README
    (pin,) = pins
    lo, hi = re.match(r"torch>=([\d.]+),<([\d.]+)", PYPROJECT["project"]["optional-dependencies"]["validate"][0]).groups()
    as_tuple = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
    assert as_tuple(lo) <= as_tuple(pin) < as_tuple(hi)
    from cuda2neuron.backend import TESTED_TORCH

    assert pin == TESTED_TORCH  # the install hint validate prints names the same torch
    lines = [line for line in README.splitlines() if line.startswith("python3 -m venv")]
    assert len(lines) == 2
    for line in lines:
        # torch alone, CPU build first (PyPI's Linux default is the CUDA build), then the project
        assert f'pip install "torch=={pin}" --extra-index-url https://download.pytorch.org/whl/cpu --retries 1 && pip install -e ' in line


def _git(*args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30,
                          check=True).stdout


def _full_history() -> bool:
    """A git checkout with its whole history: not an sdist, not a shallow clone."""
    if not (ROOT / ".git").exists():
        return False
    return _git("rev-parse", "--is-shallow-repository").strip() == "false"


def _release_commit(version: str) -> str:
    """The commit that wrote the CHANGELOG's ``## [version]`` section: the one the release tag names
    (docs/releasing.md). Found from history alone: tags do not travel with a clone of one branch."""
    commits = _git("log", "--format=%H", "-S", f"## [{version}]", "--", "CHANGELOG.md").split()
    assert commits, f"no commit wrote the CHANGELOG's ## [{version}] section"
    return commits[-1]  # the oldest: later ones only moved text around it


@pytest.mark.skipif(not _full_history(), reason="an sdist or a shallow clone: no history to ask")
def test_precommit_rev_names_a_release_of_this_repository():
    """The remote snippet's `rev:` must name a revision that exists (issue 31: v0.1.0 did not).
    Where the tag is here it must be the release commit; where no tags came with the clone (issue
    43: this test skipped there), the release commit must exist and carry that version."""
    (rev,) = re.findall(r"^\s*rev:\s*(\S+)", README, re.M)
    release = _release_commit(rev.removeprefix("v"))
    released = tomllib.loads(_git("show", f"{release}:pyproject.toml"))["project"]["version"]
    assert f"v{released}" == rev, f"{release} (the {rev} section's commit) is version {released}"
    if rev in _git("tag", "--list").split():
        assert _git("rev-list", "-n", "1", rev).strip() == release, f"{rev} tags another commit (docs/releasing.md)"
    elif _git("tag", "--list").split():  # tags, but not this one: the release was not tagged
        pytest.fail(f"{rev} is not a tag here; tag {release[:12]} (docs/releasing.md)")


def test_precommit_snippet_names_the_project_repository():
    (local, repo) = re.findall(r"^\s*- repo:\s*(\S+)", README, re.M)
    assert local == "local"  # the primary snippet runs the installed tool; the second installs ours
    assert repo == PYPROJECT["project"]["urls"]["Repository"]
    links = re.findall(r"^\[[^\]]+\]: (\S+)$", CHANGELOG, re.M)
    assert links and all(link.startswith(repo + "/") for link in links)
