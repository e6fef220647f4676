"""ruff's configuration and command-line habits (issue 43): `extend-select` / `extend-ignore` /
`extend-exclude`, a standalone cuda2neuron.toml (over pyproject.toml in the same folder),
`--exclude` / `--extend-exclude`, `--show-settings`, `--show-files`, `--color`, `--refresh`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.core import ConfigError, config_from_table, find_config, load_config

CUDA = "import torch\nx = torch.zeros(2).cuda()\n"


@pytest.mark.parametrize(("table", "select", "ignore", "exclude"), [
    pytest.param({"extend-select": ["CN101"]}, ("CN", "CN101"), (), (), id="extend-select-on-the-default"),
    pytest.param({"select": ["CN1"], "extend-select": ["CN7"]}, ("CN1", "CN7"), (), (), id="extend-select-on-select"),
    pytest.param({"ignore": ["CN2"], "extend-ignore": ["CN3", "CN2"]}, ("CN",), ("CN2", "CN3"), (),
                 id="extend-ignore-no-duplicates"),
    pytest.param({"exclude": ["a"], "extend-exclude": ["b"]}, ("CN",), (), ("a", "b"), id="extend-exclude"),
])
def test_extend_keys_add_to_the_list(table, select, ignore, exclude):
    config = config_from_table(table, "p/pyproject.toml")
    assert (config.select, config.ignore, config.exclude) == (select, ignore, exclude)


def test_extend_key_of_the_wrong_type_names_the_key():
    with pytest.raises(ConfigError, match=r"p/pyproject.toml: \[tool.cuda2neuron\].extend-select: expected a list"):
        config_from_table({"extend-select": "CN1"}, "p/pyproject.toml")


@pytest.mark.parametrize(("files", "found"), [
    pytest.param({"pyproject.toml": ""}, "pyproject.toml", id="pyproject-alone"),
    pytest.param({"cuda2neuron.toml": ""}, "cuda2neuron.toml", id="standalone-alone"),
    pytest.param({"pyproject.toml": "", "cuda2neuron.toml": ""}, "cuda2neuron.toml", id="standalone-over-pyproject"),
    pytest.param({"pyproject.toml": "", "../cuda2neuron.toml": ""}, "pyproject.toml", id="the-nearest-folder-wins"),
])
def test_which_file_configures_a_folder(tmp_path, files, found):
    here = tmp_path / "proj"
    here.mkdir()
    for name, text in files.items():
        (here / name).write_text(text)
    assert find_config(here / "sub.py") == here / found
    assert find_config(here) == here / found


def test_a_standalone_file_holds_the_keys_at_its_top_level(tmp_path):
    f = tmp_path / "cuda2neuron.toml"
    f.write_text('select = ["CN1"]\ntarget = "accelerator"\n[per-file-ignores]\n"tests/*" = ["CN101"]\n')
    config = load_config(f)
    assert (config.select, config.settings.target, config.per_file_ignores) == (
        ("CN1",), "accelerator", (("tests/*", ("CN101",)),))
    f.write_text('[tool.cuda2neuron]\nselect = ["CN1"]\n')
    with pytest.raises(ConfigError, match="cuda2neuron.toml: a file not named pyproject.toml holds the keys"):
        load_config(f)
    f.write_text('selct = ["CN1"]\n')
    with pytest.raises(ConfigError, match=r"cuda2neuron.toml: unknown key 'selct'"):
        load_config(f)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "vendor").mkdir(parents=True)
    (root / "train.py").write_text(CUDA)
    (root / "vendor" / "lib.py").write_text(CUDA)
    (root / "conf.json").write_text('{"device": "cuda"}\n')
    (root / "pyproject.toml").write_text('[tool.cuda2neuron]\nselect = ["CN2"]\n')
    (root / "cuda2neuron.toml").write_text('extend-select = ["CN7"]\nextend-exclude = ["vendor"]\n')
    return root


def test_show_settings_prints_the_resolved_settings_and_their_file(run_cli, proj):
    code, out, _ = run_cli("check", "--show-settings", "--ignore", "CN731", ".", cwd=proj)
    assert code == 0
    assert out.splitlines()[:4] == [f"# config: {proj / 'cuda2neuron.toml'}", 'select = ["CN", "CN7"]',
                                    'ignore = ["CN731"]', 'exclude = ["vendor"]']


@pytest.mark.parametrize(("args", "files"), [
    pytest.param((), ["conf.json", "cuda2neuron.toml", "pyproject.toml", "train.py"], id="config-extend-exclude"),
    pytest.param(("--exclude", "conf.json"), ["cuda2neuron.toml", "pyproject.toml", "train.py", "vendor/lib.py"],
                 id="exclude-replaces-the-config"),
    pytest.param(("--extend-exclude", "*.toml,conf.json"), ["train.py"], id="extend-exclude-adds"),
])
def test_show_files_lists_what_check_would_read(run_cli, proj, args, files):
    code, out, _ = run_cli("check", "--show-files", *args, ".", cwd=proj)
    assert code == 0
    assert out.splitlines() == files


@pytest.mark.parametrize(("colour", "escapes"), [("always", True), ("never", False), ("auto", False)])
def test_color_decides_for_a_pipe(run_cli, proj, monkeypatch, colour, escapes):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    code, out, _ = run_cli("check", "--color", colour, "train.py", cwd=proj)
    assert code == 1 and "CN101" in out
    assert ("\x1b[" in out) is escapes


def test_refresh_reprocesses_and_writes_the_cache(run_cli, proj, tmp_path, monkeypatch):
    from cuda2neuron.cli._options import RefreshingCache
    from cuda2neuron.workspace import ResultCache

    monkeypatch.setenv("CUDA2NEURON_RESULTS_CACHE", str(tmp_path / "cache"))
    cache = ResultCache()
    code, _, _ = run_cli("check", "--no-cache", "train.py", cwd=proj)
    assert code == 1 and not any(cache.root.rglob("*.json"))  # --no-cache writes nothing
    code, _, _ = run_cli("check", "--refresh", "train.py", cwd=proj)
    assert code == 1 and len(list(cache.root.rglob("*.json"))) == 1
    entry = next(cache.root.rglob("*.json"))
    key = entry.parent.name + entry.stem
    assert cache.get(key) is not None and RefreshingCache().get(key) is None  # written, never read
    code, _, err = run_cli("check", "--refresh", "--no-cache", "train.py", cwd=proj)
    assert code == 2 and "exclude each other" in err
