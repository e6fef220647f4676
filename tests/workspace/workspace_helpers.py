"""Helpers shared by the workspace tests (imported by name: the test folders are not packages)."""

from __future__ import annotations

from pathlib import Path

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.workspace import discover, process_files, with_project_facts


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``root``, folders included; returns ``root``."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def port_both(project: Path) -> dict[bool, dict[str, tuple[str, list]]]:
    """The port of a fixture project, plain (False) and with ``--unsafe-fixes`` (True): each file
    (its path below ``project``) -> (its text after migrate, its findings). One sweep of the
    project's facts serves both runs, as one ``migrate`` run's does."""
    found = discover([project])
    config = with_project_facts(Config(), found.files)
    root = project.resolve()
    ports: dict[bool, dict[str, tuple[str, list]]] = {}
    for unsafe in (False, True):
        results = process_files(found.files, config, RunOptions(fix=True, unsafe=unsafe), jobs=1)
        ports[unsafe] = {
            Path(r.path).resolve().relative_to(root).as_posix(): ((r.new_bytes or Path(r.path).read_bytes()).decode(), list(r.findings))
            for r in results
        }
    return ports
