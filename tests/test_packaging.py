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
