"""Which trees are compared, and the [tool.cuda2neuron.validate] table."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cuda2neuron.core import ConfigError, load_validate_table
from cuda2neuron.validate._trees import TreeError, resolve_trees


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "model.py").write_text("device = 'cuda'\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "original")
    # the in-place migrate, not committed
    (root / "proj" / "model.py").write_text("device = 'neuron'\n")
    return root


def test_pair_of_paths(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    trees = resolve_trees((tmp_path / "a", tmp_path / "b"))
    assert (trees.original, trees.port) == ((tmp_path / "a").resolve(), (tmp_path / "b").resolve())
    assert trees.tempdir is None


@pytest.mark.parametrize("sub", [".", "proj"], ids=["repo-root", "subfolder"])
def test_git_revision_is_extracted_without_touching_the_work_tree(repo: Path, sub: str):
    path = repo / sub
    trees = resolve_trees((path,))
    try:
        rel = Path("proj/model.py") if sub == "." else Path("model.py")
        assert (trees.original / rel).read_text() == "device = 'cuda'\n"
        assert trees.port == path.resolve()
        assert (path / rel).read_text() == "device = 'neuron'\n"
        assert "HEAD" in trees.original_label
    finally:
        trees.cleanup()
    assert not trees.original.exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status.strip() == "M proj/model.py"


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: (tmp / "missing", tmp), "not a directory"),
        (lambda tmp: (tmp,), "not inside a git repository"),
        (lambda tmp: (tmp, tmp, tmp), "give ORIGINAL PORT"),
    ],
    ids=["missing-path", "single-path-no-git", "three-paths"],
)
def test_bad_trees(tmp_path: Path, make, fragment):
    with pytest.raises(TreeError, match=fragment):
        resolve_trees(make(tmp_path))


def test_unknown_revision(repo: Path):
    with pytest.raises(TreeError, match="revision 'nope' not found"):
        resolve_trees((repo / "proj",), "nope")


@pytest.mark.parametrize("sub", [".", "proj"], ids=["repo-root", "subfolder"])
def test_committed_port_is_refused_with_a_rev_hint(repo: Path, sub: str):
    """`validate .` after the port was committed: HEAD is the port, the original would be itself."""
    _git(repo, "commit", "-qam", "port to neuron")
    port_commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True,
                                 text=True).stdout.strip()
    with pytest.raises(TreeError, match="identical to git revision HEAD") as info:
        resolve_trees((repo / sub,))
    message = str(info.value)
    assert "--rev <pre-port commit>" in message and f"--rev {port_commit}~1" in message, message
    trees = resolve_trees((repo / sub,), f"{port_commit}~1")  # the hint works
    try:
        rel = Path("proj/model.py") if sub == "." else Path("model.py")
        assert (trees.original / rel).read_text() == "device = 'cuda'\n"
    finally:
        trees.cleanup()


def test_a_new_file_alone_does_not_make_a_committed_port_a_pair(repo: Path):
    # New files go to both runs (below): with the port committed, the original would be the port.
    _git(repo, "commit", "-qam", "port to neuron")
    (repo / "proj" / "extra.py").write_text("x = 1\n")
    with pytest.raises(TreeError, match="identical to git revision HEAD"):
        resolve_trees((repo / "proj",))


@pytest.mark.parametrize("sub", [".", "proj"], ids=["repo-root", "subfolder"])
def test_files_new_since_the_revision_go_to_both_runs(repo: Path, sub: str):
    """The entry written after an in-place migrate, in CUDA terms: the original run gets it as
    written, the port run migrated (in an overlay); the work tree is not touched."""
    entry = "import torch\n\ndef build():\n    return torch.nn.Linear(2, 2).cuda(), torch.zeros(1, 2, device='cuda')\n"
    (repo / "proj" / "validate_entry.py").write_text(entry)
    (repo / "proj" / "data").mkdir()
    (repo / "proj" / "data" / "batch.txt").write_text("1 2\n")
    (repo / "proj" / "ignored.py").write_text("junk = 'cuda'\n")
    (repo / ".gitignore").write_text("ignored.py\n")
    trees = resolve_trees((repo / sub,))
    prefix = "proj/" if sub == "." else ""
    try:
        assert set(trees.new_files) == {f"{prefix}validate_entry.py", f"{prefix}data/batch.txt"} | (
            {".gitignore"} if sub == "." else set())
        assert (trees.original / prefix / "validate_entry.py").read_text() == entry
        assert (trees.original / prefix / "data" / "batch.txt").read_text() == "1 2\n"
        assert not (trees.original / prefix / "ignored.py").exists()
        assert trees.port_overlay is not None
        migrated = (trees.port_overlay / prefix / "validate_entry.py").read_text()
        assert ".cuda()" not in migrated and ".to(\"neuron\")" in migrated and "device='neuron'" in migrated
        assert not (trees.port_overlay / prefix / "data").exists()  # only Python is migrated
        assert (repo / "proj" / "validate_entry.py").read_text() == entry
        assert any("validate_entry.py (2 edits)" in n for n in trees.notes), trees.notes
    finally:
        trees.cleanup()
    assert trees.port_overlay is not None and not trees.port_overlay.exists()


def test_a_new_file_that_cannot_be_migrated_says_what_to_do(repo: Path):
    (repo / "proj" / "validate_entry.py").write_text("import torch\nx = y.cuda(\n")
    with pytest.raises(TreeError, match=r"validate_entry.py:3: not at git revision HEAD.*commit it before migrating"):
        resolve_trees((repo / "proj",))


CONFIGS = [
    ("absent", "", {}),
    ("entry-and-steps", '[tool.cuda2neuron.validate]\nentry = "m:build"\nsteps = 2\n', {"entry": "m:build", "steps": 2}),
    ("tolerances", '[tool.cuda2neuron.validate.tolerances]\npass_factor = 8\n', {"tolerances": {"pass_factor": 8}}),
    # keys the request reads (docs/validate.md): the config layer refused nproc and fail_on before
    ("ranks-fail-on-logic", '[tool.cuda2neuron.validate]\nnproc = 2\nfail_on = "warn"\nlogic = false\n',
     {"nproc": 2, "fail_on": "warn", "logic": False}),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_config(tmp_path: Path, text: str, expected: dict):
    (tmp_path / "pyproject.toml").write_text(text)
    assert load_validate_table(tmp_path) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[tool.cuda2neuron.validate]\nentri = 'x'\n", "unknown key"),
        ("[tool.cuda2neuron.validate]\nsteps = 0\n", "steps must be a positive integer"),
        ("[tool.cuda2neuron.validate.tolerances]\npass_factor = 'big'\n", "must map names to numbers"),
        ("[tool.cuda2neuron.validate\n", "invalid TOML"),
    ],
    ids=["typo", "zero-steps", "non-numeric-tolerance", "broken-toml"],
)
def test_bad_config_names_the_file(tmp_path: Path, text: str, fragment: str):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match=fragment) as info:
        load_validate_table(tmp_path)
    assert str(tmp_path / "pyproject.toml") in str(info.value)
