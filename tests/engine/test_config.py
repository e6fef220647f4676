"""[tool.cuda2neuron] parsing and rule selection."""

from __future__ import annotations

import os

import pytest

from cuda2neuron.core import Config, ConfigError, load_config
from cuda2neuron.core import config_from_table


@pytest.mark.parametrize(
    ("select", "ignore", "code", "expected"),
    [
        pytest.param(("CN",), (), "CN101", True, id="default-all"),
        pytest.param(("CN2",), (), "CN101", False, id="not-selected"),
        pytest.param(("CN",), ("CN1",), "CN101", False, id="ignored-family"),
        pytest.param(("CN101",), ("CN1",), "CN101", True, id="specific-select-beats-broad-ignore"),
        pytest.param(("CN1",), ("CN101",), "CN102", True, id="ignore-one-keeps-siblings"),
    ],
)
def test_selection(select, ignore, code, expected):
    assert Config(select=select, ignore=ignore).selects(code) is expected


@pytest.mark.parametrize(
    ("table", "message"),
    [
        pytest.param({"selct": ["CN1"]}, "unknown key 'selct'", id="typo-key"),
        pytest.param({"select": "CN1, 3"}, "got the string", id="string-select"),
        pytest.param({"exclude": "tests/"}, "exclude: expected a list of strings", id="string-exclude"),
        pytest.param({"per-file-ignores": {"tests/*": "CN1"}}, "per-file-ignores", id="string-per-file-codes"),
        pytest.param({"min-torch": 2.10}, "quoted", id="float-min-torch"),
        pytest.param({"min-torch": 2}, "quoted", id="int-min-torch"),
        pytest.param({"validate": {"timeout": "60"}}, "timeout", id="string-validate-timeout"),
        pytest.param({"validate": {"args": "--fast"}}, "args", id="string-validate-args"),
        pytest.param({"validate": {"entry": ["m:f"]}}, "entry", id="list-validate-entry"),
        pytest.param({"validate": {"tolerances": {"atol": True}}}, "tolerances", id="bool-tolerance"),
        pytest.param({"select": [1]}, "expected a list of strings", id="bad-select"),
        pytest.param({"amp-dtype": "fp8"}, "amp-dtype", id="bad-dtype"),
        pytest.param({"target": "xla"}, "target", id="bad-target"),
        pytest.param({"min-torch": "two"}, "min-torch", id="bad-version"),
        pytest.param({"min-torch-neuronx": 2.14}, "quoted", id="float-min-torch-neuronx"),
        pytest.param({"min-torch-neuronx": "2.14.x"}, "min-torch-neuronx", id="bad-neuronx-version"),
        pytest.param({"unsafe-fixes": "yes"}, "unsafe-fixes", id="bad-bool"),
        pytest.param({"per-file-ignores": ["a"]}, "per-file-ignores", id="bad-per-file"),
    ],
)
def test_bad_values_name_file_and_key(table, message):
    if message is None:
        config_from_table(table, "p/pyproject.toml")
        return
    with pytest.raises(ConfigError) as exc:
        config_from_table(table, "p/pyproject.toml")
    assert "p/pyproject.toml" in str(exc.value) and message in str(exc.value)


def test_invalid_toml_names_file(tmp_path):
    f = tmp_path / "pyproject.toml"
    f.write_text("[tool.cuda2neuron\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(f)


def test_values_reach_settings(tmp_path):
    f = tmp_path / "pyproject.toml"
    f.write_text('[tool.cuda2neuron]\ntarget = "accelerator"\namp-dtype = "float16"\nmin-torch = "2.7"\n')
    cfg = load_config(f)
    assert (cfg.settings.target, cfg.settings.amp_dtype, cfg.settings.min_torch) == ("accelerator", "float16", (2, 7))


def test_min_torch_neuronx_reaches_settings(tmp_path):
    f = tmp_path / "pyproject.toml"
    f.write_text('[tool.cuda2neuron]\nmin-torch-neuronx = "2.14.3.0"\n')
    cfg = load_config(f)
    assert (cfg.settings.min_torch_neuronx, cfg.min_torch_neuronx_given) == ((2, 14, 3, 0), True)


# per-file-ignores patterns are relative to the config file's folder (ruff's convention).
PER_FILE = [
    pytest.param("scripts/*", "scripts/run.py", True, id="anchored-folder-pattern"),
    pytest.param("scripts/*", "pkg/scripts/run.py", False, id="anchored-not-at-depth"),
    pytest.param("scripts/", "scripts/sub/run.py", True, id="folder-with-slash"),
    pytest.param("test_*.py", "pkg/tests/test_a.py", True, id="bare-file-name-at-any-depth"),
    pytest.param("vendor", "src/vendor/lib.py", True, id="bare-folder-name-at-any-depth"),
    pytest.param("legacy/*.py", "legacy/old.py", True, id="glob-in-folder"),
    pytest.param("legacy/*.py", "legacy2/old.py", False, id="similar-folder"),
]


@pytest.mark.parametrize(("pattern", "rel", "ignored"), PER_FILE)
@pytest.mark.parametrize("cwd", ["root", "sub", "outside"])
def test_per_file_ignores_are_relative_to_the_config(tmp_path, monkeypatch, pattern, rel, ignored, cwd):
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    config = Config(per_file_ignores=((pattern, ("CN1",)),), source=str(root / "pyproject.toml"))
    here = {"root": root, "sub": root / "sub", "outside": tmp_path}[cwd]
    monkeypatch.chdir(here)
    shown = os.path.relpath(root / rel, here)  # the path as the user typed it from there
    assert config.selects("CN101", shown) is not ignored
    assert config.selects("CN201", shown)  # other codes are never affected
