"""Every package folder ships: setuptools installs only the packages pyproject.toml lists."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(setup["packages"])
    folders = {package: ROOT / folder for package, folder in setup["package-dir"].items()}
    found = set()
    for package, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            if "_sitecustomize" in rel.parts or "__pycache__" in rel.parts:
                continue
            found.add(".".join((package, *rel.parts)) if rel.parts else package)
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == set(), "these are listed but have no __init__.py"


# -- the source distribution ------------------------------------------------------------------
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tuple[list[str], str]:
    """The sdist setuptools builds from a copy of this checkout: its members and PKG-INFO."""
    pytest.importorskip("setuptools", minversion="77")
    root = tmp_path_factory.mktemp("sdist")
    tree = root / "src"
    anywhere = shutil.ignore_patterns(".git", ".venv", "*.egg-info", "__pycache__", ".pytest_cache", "*.so")

    def ignore(folder, names):
        # build/ and dist/ only at the top: rules/dist is the distributed rule family.
        top = {"build", "dist", "venv"} if Path(folder) == ROOT else set()
        return set(anywhere(folder, names)) | (top & set(names))

    shutil.copytree(ROOT, tree, ignore=ignore)
    out = root / "dist"
    # Without build isolation: the setuptools of this environment (torch needs it), offline.
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=tree, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    name = proc.stdout.strip().splitlines()[-1]
    with tarfile.open(out / name) as tar:
        members = tar.getnames()
        top = members[0].split("/")[0]
        info = tar.extractfile(f"{top}/PKG-INFO").read().decode()  # type: ignore[union-attr]
    return [m.split("/", 1)[1] for m in members if "/" in m], info


def test_sdist_holds_the_docs_the_examples_and_the_changelog(sdist):
    members, _ = sdist
    have = set(members)
    for path in ("README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml", ".pre-commit-hooks.yaml"):
        assert path in have, path
    docs = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    assert docs and docs <= have, docs - have
    examples = {p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".md")}
    assert examples and examples <= have, examples - have
    assert "backend/csrc/module.cpp" in have  # the emulated device is compiled from these
    assert not any("__pycache__" in m or m.endswith((".pyc", ".so")) for m in members)


def test_metadata_license_classifiers_urls_keywords(sdist):
    _, info = sdist
    # PEP 639: the SPDX expression, and the file it names.
    assert "License-Expression: Apache-2.0" in info and "License-File: LICENSE" in info
    assert "\nLicense: " not in info  # the deprecated free-text field
    assert "Classifier: Development Status :: 3 - Alpha" in info
    assert not any(line.startswith("Classifier: License ::") for line in info.splitlines())  # PEP 639 forbids both
    urls = [line.split(", ", 1) for line in info.splitlines() if line.startswith("Project-URL: ")]
    assert {label.removeprefix("Project-URL: ") for label, _ in urls} >= {"Homepage", "Repository", "Issues", "Changelog"}
    assert "Keywords: " in info and "trainium" in info
