"""The per-file result cache: a hit only for the same bytes, path, kind, config, options and engine."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cuda2neuron.core import Config, FileResult, FileStatus, ProjectFacts, RunOptions, Settings
from cuda2neuron.kinds import process_kind
from cuda2neuron.workspace import ResultCache, SourceFile, process_files
from cuda2neuron.workspace import _runner

CUDA = "import torch\nx = torch.zeros(3).cuda()\n"


@pytest.fixture
def cache(tmp_path):
    return ResultCache(tmp_path / "cache")


def _file(tmp_path: Path, text: str = CUDA, name: str = "train.py") -> SourceFile:
    path = tmp_path / "proj" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return SourceFile.at(path, tmp_path / "proj")


def _entries(cache: ResultCache) -> int:
    return sum(1 for p in cache.root.rglob("*.json")) if cache.root.exists() else 0


def test_a_warm_run_returns_the_same_results_without_processing(tmp_path, cache, monkeypatch):
    src = _file(tmp_path)
    cold = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert cold[0].status is FileStatus.CHANGED and _entries(cache) == 1

    def fail(*args):
        raise AssertionError("a cached file was processed again")

    monkeypatch.setattr(_runner, "process_kind", fail)
    warm = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert warm == cold


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda f, c, o: (f, c, RunOptions(fix=not o.fix)), id="fix-or-not"),
        pytest.param(lambda f, c, o: (f, c, replace(o, unsafe=True)), id="unsafe-fixes"),
        pytest.param(lambda f, c, o: (f, replace(c, select=("CN2",)), o), id="select"),
        pytest.param(lambda f, c, o: (f, c.with_overrides(target="accelerator"), o), id="target"),
        pytest.param(lambda f, c, o: (f, replace(c, settings=Settings(min_torch=(2, 5))), o), id="min-torch"),
        pytest.param(lambda f, c, o: (replace(f, kind="shell"), c, o), id="kind"),
    ],
)
def test_anything_that_decides_a_result_is_in_the_key(tmp_path, cache, change):
    src, config, options = _file(tmp_path), Config(), RunOptions(fix=True)
    data = src.path.read_bytes()
    key = cache.key(str(src.path), src.kind, data, config, options)
    src2, config2, options2 = change(src, config, options)
    assert cache.key(str(src2.path), src2.kind, data, config2, options2) != key


def test_other_bytes_or_path_miss(tmp_path, cache):
    src = _file(tmp_path)
    key = cache.key(str(src.path), "python", b"a", Config(), RunOptions())
    assert cache.key(str(src.path), "python", b"b", Config(), RunOptions()) != key
    assert cache.key("other.py", "python", b"a", Config(), RunOptions()) != key


def test_failed_files_are_not_cached(tmp_path, cache):
    src = _file(tmp_path, "x = y.cuda()\ndef (:\n")
    [result] = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    assert result.status is FileStatus.FAILED and _entries(cache) == 0


def test_a_corrupt_entry_is_a_miss_and_is_replaced(tmp_path, cache):
    src = _file(tmp_path)
    [cold] = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    [entry] = cache.root.rglob("*.json")
    entry.write_bytes(b"not an entry")
    [again] = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    assert again == cold
    assert isinstance(cache.get(cache.key(str(src.path), src.kind, src.path.read_bytes(), Config(), RunOptions())), FileResult)


def test_parallel_run_fills_and_reads_the_cache(tmp_path, cache):
    files = [_file(tmp_path, CUDA if i % 2 else "x = 1\n", f"m{i}.py") for i in range(40)]
    cold = process_files(files, Config(), RunOptions(fix=True), jobs=2, cache=cache)
    assert _entries(cache) == 40
    warm = process_files(files, Config(), RunOptions(fix=True), jobs=2, cache=cache)
    assert warm == cold == process_files(files, Config(), RunOptions(fix=True), jobs=1)


def test_the_key_does_not_depend_on_hash_randomisation(tmp_path):
    code = (
        "from cuda2neuron.core import Config, ProjectFacts, RunOptions\n"
        "from cuda2neuron.workspace import ResultCache\n"
        "c = Config().with_overrides(project=ProjectFacts(frozenset({'a_cuda', 'b_cuda', 'c_cuda'}), frozenset({'k1', 'k2'})))\n"
        "print(ResultCache().key('f.py', 'python', b'x', c, RunOptions()))\n"
    )
    keys = {
        subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True, check=True).stdout
        for seed in ("1", "2", "3")
    }
    assert len(keys) == 1


def test_the_key_holds_the_project_facts():
    # A file's findings depend on what the project sweep found elsewhere (`import
    # selective_scan_cuda` is only CUDA-only because setup.py builds it): the key must change.
    cache = ResultCache(Path("unused"))
    plain = Config()
    with_ext = Config().with_overrides(project=ProjectFacts(extension_modules=frozenset({"selective_scan_cuda"})))
    with_loader = Config().with_overrides(project=ProjectFacts(extension_loaders=frozenset({"pkg.jit.load"})))
    keys = {cache.key("f.py", "python", b"import selective_scan_cuda\n", c, RunOptions()) for c in (plain, with_ext, with_loader)}
    assert len(keys) == 3


def test_concurrent_runs_share_one_cache(tmp_path):
    for i in range(30):
        _file(tmp_path, CUDA + f"y{i} = 1\n", f"m{i}.py")
    env = {**os.environ, "CUDA2NEURON_RESULTS_CACHE": str(tmp_path / "shared")}
    cmd = [sys.executable, "-m", "cuda2neuron", "check", "--jobs", "1", str(tmp_path / "proj")]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [1, 1, 1]
    assert len({out for out, _ in outs}) == 1 and b"CN101" in outs[0][0]
    assert not list((tmp_path / "shared").rglob("*.tmp"))
    assert len(list((tmp_path / "shared").rglob("*.json"))) == 30


def test_no_cache_flag_bypasses_it(tmp_path):
    _file(tmp_path)
    env = {**os.environ, "CUDA2NEURON_RESULTS_CACHE": str(tmp_path / "c")}
    run = subprocess.run([sys.executable, "-m", "cuda2neuron", "check", "--no-cache", str(tmp_path / "proj")], env=env, capture_output=True)
    assert run.returncode == 1 and not (tmp_path / "c").exists()
    run = subprocess.run([sys.executable, "-m", "cuda2neuron", "check", str(tmp_path / "proj")], env=env, capture_output=True)
    assert run.returncode == 1 and list((tmp_path / "c").rglob("*.json"))
