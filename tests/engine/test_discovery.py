"""Which files a run sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.workspace import discover


def _names(root: Path, **kw) -> set[str]:
    found = discover([root], **kw)
    return {f.path.relative_to(root).as_posix() for f in found.files if f.kind == "python"}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        "a.py": "",
        "pkg/b.py": "",
        "pkg/gen/out.py": "",
        "pkg/keep.log.py": "",
        "venv_custom/lib/x.py": "",
        "venv_custom/pyvenv.cfg": "",
        "build/lib/y.py": "",
        "dist/pkg-1.0/setup.py": "",
        # Packages that own a module named like a build output are source.
        "pkg/dist/__init__.py": "",
        "pkg/dist/comm.py": "",
        "pkg/build/__init__.py": "",
        "node_modules/z.py": "",
        "pkg/__pycache__/c.py": "",
        "sub/.gitignore": "local_*.py\n",
        "sub/local_a.py": "",
        "sub/kept.py": "",
        ".gitignore": "pkg/gen/\n*.log.py\n",
        "readme.md": "",
        "third_party/vendored.py": "",
    }
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_ignores_and_pruned_folders(tree):
    assert _names(tree) == {
        "a.py", "pkg/b.py", "sub/kept.py", "third_party/vendored.py",
        "pkg/dist/__init__.py", "pkg/dist/comm.py", "pkg/build/__init__.py",
    }


def test_exclude_globs(tree):
    assert "third_party/vendored.py" not in _names(tree, exclude=["third_party/"])


def test_explicit_file_is_taken_even_if_ignored(tree):
    found = discover([tree / "pkg" / "gen" / "out.py"])
    assert [(f.path.name, f.root, f.kind) for f in found.files] == [("out.py", tree / "pkg" / "gen", "python")]


def test_missing_path_is_an_error(tmp_path):
    found = discover([tmp_path / "missing"])
    assert found.skipped[0].error and "does not exist" in found.skipped[0].reason


def test_symlinks_are_reported_not_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "m.py").write_text("")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "link.py").symlink_to(tmp_path / "real" / "m.py")
    (tmp_path / "proj" / "linkdir").symlink_to(tmp_path / "real")
    found = discover([tmp_path / "proj"])
    assert found.files == ()
    assert [Path(s.path).name for s in found.skipped] == ["link.py"]


def test_each_file_carries_its_root_and_kind(tmp_path):
    (tmp_path / "proj" / "scripts").mkdir(parents=True)
    for name in ("train.py", "scripts/launch.sh", "requirements.txt", "notes.md"):
        (tmp_path / "proj" / name).write_text("")
    found = discover([tmp_path / "proj"])
    assert sorted((f.path.relative_to(f.root).as_posix(), f.kind) for f in found.files) == [
        ("requirements.txt", "requirements"),
        ("scripts/launch.sh", "shell"),
        ("train.py", "python"),
    ]


@pytest.mark.parametrize(
    ("walked", "pattern", "gone"),
    [
        # The config lives in the tree's root: "sub/kept.py" means that file from anywhere.
        pytest.param(".", "sub/kept.py", {"sub/kept.py"}, id="walk-the-root"),
        pytest.param("sub", "sub/kept.py", {"kept.py"}, id="walk-a-subfolder"),
        pytest.param("sub", "/sub/kept.py", {"kept.py"}, id="rooted-pattern"),
        pytest.param("pkg", "b.py", {"b.py"}, id="bare-file-name"),
    ],
)
def test_exclude_is_relative_to_the_config_folder(tree, walked, pattern, gone):
    root = tree / walked
    everything = _names(root)
    assert gone <= everything
    assert _names(root, exclude=[pattern], exclude_root=tree) == everything - gone


def test_a_migrated_copy_is_never_walked_into(tmp_path):
    (tmp_path / "src.py").write_text("")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "src.py").write_text("")
    (tmp_path / "out" / ".cuda2neuron-port.json").write_text("{}\n")
    assert _names(tmp_path) == {"src.py"}
    # Named itself, the copy is checked.
    assert {f.path.name for f in discover([tmp_path / "out"]).files if f.kind == "python"} == {"src.py"}
