"""Faults and hostile input, bounded to seconds: what issue 33 found must stay fixed.

Fuzzed cache entries, nesting that crashes libcst's parser, odd encodings and file names, a worker
that dies or overruns its budget, the parent killed under its workers, stale temp files, hard
links and owners, full disks. (Git errors: tests/cli/test_git_guard.py; --out reuse:
tests/workspace/test_port.py; hostile validate entries: tests/validate/test_hostile_entries.py.)
The fault run with real disks and kill -9 at several points is bench/fault_run.py.
"""

from __future__ import annotations

import errno
import faulthandler
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda2neuron.core import Config, FileResult, FileStatus, RunOptions, atomic_write, remove_stale_temps
from cuda2neuron.workspace import ResultCache, SourceFile, process_files
from cuda2neuron.workspace import _cache, _runner
from cuda2neuron.workspace._pool import Budget

CUDA = "import torch\nmodel = Net().cuda()\n"
PORTED = 'import torch\nmodel = Net().to("neuron")\n'


def _files(root: Path, n: int, text: str = CUDA) -> list[SourceFile]:
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = root / f"m{i:02d}.py"
        p.write_text(text + f"v{i} = {i}\n")
        out.append(SourceFile.at(p, root))
    return out


# -- the results cache: plain data, checked, any problem a miss --------------------------------


@pytest.fixture
def filled(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    [src] = _files(tmp_path / "proj", 1)
    [cold] = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert cold.status is FileStatus.CHANGED
    key = cache.key(str(src.path), src.kind, src.path.read_bytes(), Config(), RunOptions(fix=True))
    [entry] = cache.root.rglob("*.json")
    return cache, src, key, entry, cold


def _mutations(raw: bytes, rng: random.Random):
    """Bit flips, cuts, splices and garbage: what a torn disk or a careless hand makes."""
    for _ in range(120):
        data = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        yield bytes(data)
    for cut in range(0, len(raw), max(1, len(raw) // 40)):
        yield raw[:cut]
    for _ in range(40):
        yield bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    yield b"\x80\x04\x95" + raw  # a pickle's opening bytes


def _resigned(cache: ResultCache, key: str, payload: bytes) -> bytes:
    """An entry whose checksum is right: what someone who may write the cache can make."""
    return _cache._MAGIC + cache._checksum(key, payload) + b"\n" + payload


def _hostile_payloads(good: dict):
    deep = b"[" * 100_000 + b"]" * 100_000
    yield deep
    yield b'{"p": 1' + b"9" * 5000 + b"}"
    yield json.dumps({**good, "s": "failed"}).encode()
    yield json.dumps({**good, "n": "not base64!"}).encode()
    yield json.dumps({**good, "n": None}).encode()  # "changed" without new bytes
    yield json.dumps({**good, "f": [["CN101"] * 9]}).encode()
    yield json.dumps({**good, "f": [[*good["f"][0][:4], [1, 2, 3, -1], *good["f"][0][5:]]]}).encode()
    yield json.dumps({**good, "f": [[*good["f"][0][:4], [True, 0, 1, 1], *good["f"][0][5:]]]}).encode()
    yield json.dumps({**good, "f": [[*good["f"][0][:4], [2**40, 0, 1, 1], *good["f"][0][5:]]]}).encode()
    yield json.dumps({**good, "extra": 1}).encode()
    yield json.dumps([good]).encode()
    yield json.dumps({**good, "p": "/elsewhere.py"}).encode()


def test_fuzzed_cache_entries_are_misses_never_errors(filled):
    cache, src, key, entry, cold = filled
    raw = entry.read_bytes()
    data = src.path.read_bytes()
    rng = random.Random(33)
    accepted = 0
    for mutated in _mutations(raw, rng):
        entry.write_bytes(mutated)
        hit = cache.get(key, str(src.path), data)  # never raises (MemoryError, OverflowError ...)
        if hit is not None:
            accepted += 1
            assert hit == cold
    assert accepted <= 1  # only an unchanged entry (a no-op flip pair) may hit
    good = json.loads(raw.split(b"\n", 1)[1])
    for payload in _hostile_payloads(good):
        entry.write_bytes(_resigned(cache, key, payload))
        assert cache.get(key, str(src.path), data) is None


def test_an_entry_under_another_key_or_engine_is_a_miss(filled, monkeypatch):
    cache, src, key, entry, _ = filled
    other = cache._path("ab" + key[2:])
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_bytes(entry.read_bytes())
    assert cache.get("ab" + key[2:]) is None
    assert cache.get(key) is not None
    monkeypatch.setattr(_cache, "engine_fingerprint", lambda: "another engine")
    assert cache.get(key) is None


def test_a_pickle_in_the_cache_is_never_executed(tmp_path, filled):
    cache, src, key, entry, _ = filled
    marker = tmp_path / "pwned"
    payload = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    for path in (entry, entry.with_suffix(".pickle")):
        path.write_bytes(payload)
    process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert not marker.exists()
    # Nothing that reads the cache folder can unpickle.
    assert not any(b"import pickle" in p.read_bytes() or b"pickle.load" in p.read_bytes()
                   for p in Path(_cache.__file__).parent.glob("*.py"))


def test_a_cached_rewrite_that_does_not_compile_is_not_used(filled):
    cache, src, key, entry, cold = filled
    good = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    import base64

    good["n"] = base64.b64encode(b"import torch\nmodel = Net().to(\n").decode()
    entry.write_bytes(_resigned(cache, key, json.dumps(good).encode()))
    [again] = process_files([src], Config(), RunOptions(fix=True), jobs=1, cache=cache)
    assert again.new_bytes == PORTED.encode() + b"v0 = 0\n"  # processed afresh, not the entry


def test_a_file_name_that_is_not_utf8_is_cached(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    name = os.fsdecode(b"caf\xe9.py")
    (root / name).write_text(CUDA)
    cache = ResultCache(tmp_path / "cache")
    src = SourceFile.at(root / name, root)
    cold = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    warm = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    assert cold == warm and cold[0].findings


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({"CUDA2NEURON_RESULTS_CACHE": "/r", "CUDA2NEURON_CACHE": "/c", "XDG_CACHE_HOME": "/x"}, "/r", id="results"),
        pytest.param({"CUDA2NEURON_CACHE": "/c", "XDG_CACHE_HOME": "/x"}, "/c/results", id="c2n-cache"),
        pytest.param({"XDG_CACHE_HOME": "/x"}, "/x/cuda2neuron/results", id="xdg"),
        pytest.param({"XDG_CACHE_HOME": "relative"}, "~/.cache/cuda2neuron/results", id="xdg-relative-ignored"),
        pytest.param({}, "~/.cache/cuda2neuron/results", id="home"),
    ],
)
def test_the_cache_root_order(monkeypatch, env, expected):
    for var in ("CUDA2NEURON_RESULTS_CACHE", "CUDA2NEURON_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert _cache.default_cache_root() == Path(os.path.expanduser(expected))


# -- input that used to crash the process, or pass as clean ------------------------------------

DEEP = {
    "parens": "x = " + "(" * 2000 + "1" + ")" * 2000,
    "lists": "x = " + "[" * 2000 + "1" + "]" * 2000,
    "unary": "x = " + "-" * 30000 + "1",
    "attribute": "x = a" + ".b" * 30000,
    "lambda": "x = " + "lambda: " * 30000 + "1",
    "boolean-chain": "x = " + " and ".join(["a"] * 30000),
    # One level per short line inside one pair of brackets, or continued with backslashes: one
    # logical line to CPython's tokenizer (issue 44: > 5 GB or > 300 s in libcst).
    "attribute-lines": "x = (a" + "\n.b" * 8000 + ")",
    "unary-lines": "x = (" + "-\n" * 8000 + "1)",
    "backslash-lines": "x = a" + " \\\n.b" * 8000,
}

_ACROSS_LINES = ("attribute-lines", "unary-lines", "backslash-lines")


@pytest.mark.parametrize("name", _ACROSS_LINES)
def test_the_nesting_guard_measures_logical_lines_as_cpython_does(name):
    from cuda2neuron.kinds._nesting import nesting_error

    nested = nesting_error(DEEP[name].encode(), f"{name}.py")
    assert nested is not None and "nests too deeply" in nested[0]


def test_long_bracketed_data_that_cpython_accepts_passes_the_guard():
    from cuda2neuron.kinds._nesting import nesting_error

    table = "rows = [\n" + "    (1, 2.5, 'a'),\n" * 3000 + "]\n"
    assert nesting_error(table.encode(), "table.py") is None


def test_deep_nesting_is_a_clean_error_not_a_crash(tmp_path):
    """In a subprocess: before the guard, these killed the process (SIGSEGV in libcst)."""
    root = tmp_path / "deep"
    root.mkdir()
    for name, body in DEEP.items():
        # The kernel word pulls each file into the project sweep as well (its MemoryError).
        (root / f"{name}.py").write_text(f"import torch\nimport triton\n{body}\ntorch.cuda.synchronize()\n")
    (root / "fine.py").write_text(CUDA)
    proc = subprocess.run([sys.executable, "-m", "cuda2neuron", "check", "--no-cache", "--jobs", "1",
                           "--output-format", "json", str(root)], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (1, 2), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    failed = {Path(f["path"]).stem: f for f in report["failures"]}
    assert set(failed) == set(DEEP), failed
    assert all(f["kind"] == "nesting" for f in failed.values()), failed
    found = [f for key in ("edits", "fixable", "manual_actions") for f in report[key]]
    assert any(f["path"].endswith("fine.py") for f in found), report


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param(CUDA.encode("utf-16"), "UTF-16", id="utf-16-bom"),
        pytest.param(CUDA.encode("utf-16-be"), "UTF-16 or UTF-32", id="utf-16-be-no-bom"),
        pytest.param(CUDA.encode("utf-32"), "UTF-32", id="utf-32-bom"),
        pytest.param(b"\x7fELF\x00\x00" + CUDA.encode(), "NUL bytes", id="binary"),
    ],
)
def test_wide_encodings_are_undecodable_not_clean(tmp_path, data, words):
    f = tmp_path / "w.py"
    f.write_bytes(data)
    [r] = process_files([SourceFile.at(f, tmp_path)], Config(), RunOptions(), jobs=1)
    assert r.status is FileStatus.FAILED and r.error.kind == "decode" and words in r.error.message


def test_cr_only_line_endings_give_the_right_lines(tmp_path):
    f = tmp_path / "cr.py"
    f.write_bytes(b"import torch\r\rx = 1\ry = torch.cuda.synchronize()\rz = Net().cuda()\r")
    [r] = process_files([SourceFile.at(f, tmp_path)], Config(), RunOptions(), jobs=1)
    assert sorted(x.line for x in r.findings) == [4, 5]


def test_a_cr_only_file_keeps_its_last_line_break(tmp_path):
    f = tmp_path / "cr.py"
    f.write_bytes(b"import torch\rx = y.cuda()\r")
    [r] = process_files([SourceFile.at(f, tmp_path)], Config(), RunOptions(fix=True), jobs=1)
    assert r.new_bytes == b'import torch\rx = y.to("neuron")\r'


def test_a_python_file_over_the_size_budget_is_skipped_before_the_parse(tmp_path):
    f = tmp_path / "big.py"
    f.write_text(CUDA * 4000)
    g = tmp_path / "big_plain.py"
    g.write_text("x = 1\n" * 40000)  # no rule's word: read, never parsed, no limit
    budget = Budget(max_bytes=64 << 10)
    r, plain = process_files([SourceFile.at(f, tmp_path), SourceFile.at(g, tmp_path)], Config(), RunOptions(),
                             jobs=1, budget=budget)
    assert r.status is FileStatus.FAILED and r.error.kind == "too-large" and "skipped: too large" in r.error.message
    assert plain.status is FileStatus.UNCHANGED


def test_a_big_file_in_a_one_process_run_has_a_time_budget(tmp_path, monkeypatch):
    """`check FILE` and `--jobs 1` had no time bound: a big file runs in one worker, under budget."""
    small = _files(tmp_path / "proj", 2)
    big = tmp_path / "proj" / "big.yaml"
    big.write_text("devices: [" + ", ".join(f"cuda:{i}" for i in range(30000)) + "]\n")
    real = _runner.process_kind

    def slow(kind, path, data, *args):
        if path.endswith("big.yaml"):
            time.sleep(60)  # a parse that runs long: only a worker's budget can stop it
        return real(kind, path, data, *args)

    monkeypatch.setattr(_runner, "process_kind", slow)  # the forked worker inherits it
    results = process_files([*small, SourceFile.at(big, tmp_path / "proj")], Config(), RunOptions(), jobs=1,
                            budget=Budget(seconds=2))
    assert [r.status for r in results[:2]] == [FileStatus.UNCHANGED] * 2
    assert results[2].status is FileStatus.FAILED and "too slow" in results[2].error.message


# -- one file never sinks the run --------------------------------------------------------------


def _pool_case(monkeypatch, tmp_path, bad_name: str, action):
    files = _files(tmp_path / "proj", 18)
    real = _runner.process_file

    def process(source, *args, **kw):
        if source.path.name == bad_name:
            action()
        return real(source, *args, **kw)

    monkeypatch.setattr(_runner, "process_file", process)  # forked workers inherit it
    return files


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
@pytest.mark.parametrize(
    ("action", "budget", "kind", "words"),
    [
        # faulthandler off first: pytest arms it, and the worker would print its stack into the output.
        pytest.param(lambda: (faulthandler.disable(), os.kill(os.getpid(), signal.SIGSEGV)), Budget(), "crash", "SIGSEGV", id="segfault"),
        pytest.param(lambda: os._exit(3), Budget(), "crash", "exit status 3", id="exit"),
        pytest.param(lambda: time.sleep(60), Budget(seconds=1.0), "too-slow", "skipped: too slow", id="slow"),
        pytest.param(lambda: (bytearray(900 << 20), time.sleep(60)), None, "too-large", "skipped: too large", id="memory"),
    ],
)
def test_a_worker_that_dies_or_overruns_costs_its_file_only(monkeypatch, tmp_path, action, budget, kind, words):
    files = _pool_case(monkeypatch, tmp_path, "m07.py", action)
    if budget is None:
        with open("/proc/self/statm") as fh:
            rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        budget = Budget(memory=rss + (400 << 20))
    seen: list[str] = []
    t0 = time.monotonic()
    results = process_files(files, Config(), RunOptions(), jobs=2, budget=budget, progress=lambda r: seen.append(r.path))
    assert time.monotonic() - t0 < 30
    bad = [r for r in results if r.status is FileStatus.FAILED]
    assert [Path(r.path).name for r in bad] == ["m07.py"]
    assert bad[0].error.kind == kind and words in bad[0].error.message, bad[0].error
    assert all(r.findings for r in results if r.status is not FileStatus.FAILED)
    assert len(seen) == len(files)  # every file reported as it finished


@pytest.mark.skipif(sys.platform != "linux", reason="fork, /proc")
def test_workers_die_with_their_parent(tmp_path):
    files = _files(tmp_path / "proj", 20)
    script = f"""
import os, sys, time
from cuda2neuron.core import Config, RunOptions
from cuda2neuron.workspace import SourceFile, process_files, _runner
real = _runner.process_file
def slow(source, *a, **k):
    time.sleep(3600)
_runner.process_file = slow
files = [SourceFile.at(p, p.parent) for p in sorted(__import__('pathlib').Path({str(files[0].root)!r}).glob('*.py'))]
print(os.getpid(), flush=True)
process_files(files, Config(), RunOptions(), jobs=2)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    parent = int(proc.stdout.readline())
    deadline = time.monotonic() + 30
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        workers = _children(parent)
    assert len(workers) == 2
    os.kill(parent, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)]


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                out.append(int(name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


# -- writing: stale temps, hard links, owners, full disks --------------------------------------


def test_stale_temp_files_of_a_killed_run_are_removed_only_when_stale(tmp_path):
    old = time.time() - 3600
    stale = tmp_path / ".a.py.abcd1234.c2n-tmp"
    young = tmp_path / ".b.py.efgh5678.c2n-tmp"
    held = tmp_path / ".c.py.ijkl9012.c2n-tmp"
    foreign = tmp_path / ".d.py.c2n-tmp"  # not our pattern
    backup = tmp_path / ".e.py.mnop3456.c2n-backup"  # maybe the only good copy: never ours to remove
    for p in (stale, young, held, foreign, backup):
        p.write_text("x")
    for p in (stale, held, foreign, backup):
        os.utime(p, (old, old))
    import fcntl

    with open(held, "rb") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        assert remove_stale_temps(tmp_path) == [stale]
    assert {p.name for p in tmp_path.iterdir()} == {young.name, held.name, foreign.name, backup.name}


def test_a_rewrite_keeps_hard_links_and_the_owner(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("old\n")
    link = tmp_path / "b.py"
    os.link(f, link)
    inode = f.stat().st_ino
    atomic_write(f, b"new\n")
    assert f.stat().st_ino == inode and link.read_text() == "new\n"
    assert not [p for p in tmp_path.iterdir() if "c2n-" in p.name]
    g = tmp_path / "g.py"
    g.write_text("old\n")
    if os.geteuid() == 0:
        os.chown(g, 4321, 4321)
        atomic_write(g, b"new\n")
        assert (g.stat().st_uid, g.stat().st_gid) == (4321, 4321) and g.read_text() == "new\n"


def test_a_write_through_that_fails_puts_the_old_bytes_back(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text("old text\n")
    os.link(f, tmp_path / "b.py")
    import builtins

    real_open = builtins.open

    class Full:
        def __init__(self, fh):
            self.fh, self.writes = fh, 0

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)

        def write(self, data):
            self.writes += 1
            if self.writes == 1:  # the new bytes: the disk is full; putting the old back works
                self.fh.write(data[:3])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.fh.write(data)

    def fake_open(path, mode="r", *a, **k):
        fh = real_open(path, mode, *a, **k)
        return Full(fh) if str(path) == str(f) and mode == "r+b" else fh

    monkeypatch.setattr(builtins, "open", fake_open)
    with pytest.raises(OSError):
        atomic_write(f, b"new text that is longer\n")
    monkeypatch.undo()
    assert f.read_text() == "old text\n" == (tmp_path / "b.py").read_text()
    assert not [p for p in tmp_path.iterdir() if "c2n-" in p.name]


def test_a_stale_backup_stops_a_second_write_through(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("torn")
    os.link(f, tmp_path / "b.py")
    (tmp_path / ".a.py.qrst7890.c2n-backup").write_text("the old file")
    with pytest.raises(OSError, match="c2n-backup"):
        atomic_write(f, b"new")
    assert f.read_text() == "torn"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "train.py").write_text(CUDA)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "i"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


@pytest.mark.parametrize(
    "report",
    [
        pytest.param("train.py/r.json", id="under-a-file"),
        pytest.param("folder.json", id="a-folder"),
    ],
)
def test_a_report_that_cannot_be_written_is_one_line(repo, run_cli, report):
    (repo / "folder.json").mkdir()
    code, _, err = run_cli("migrate", "--diff", "train.py", "--report", report, cwd=repo)
    assert code == 2 and "cannot write the report" in err, err
    assert "Traceback" not in err


def test_suppress_on_a_full_disk_names_the_file(repo, run_cli, monkeypatch):
    from cuda2neuron.cli import _suppress

    def full(path, data, mode_from=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(_suppress, "atomic_write", full)
    code, _, err = run_cli("suppress", "train.py", cwd=repo)
    assert code == 2 and "train.py: cannot write: No space left on device" in err
    assert "Traceback" not in err
    assert (repo / "train.py").read_text() == CUDA


def test_python_m_ignores_the_projects_own_modules(tmp_path):
    (tmp_path / "click.py").write_text("raise SystemExit('the project ran')\n")
    (tmp_path / "a.py").write_text(CUDA)
    proc = subprocess.run([sys.executable, "-m", "cuda2neuron", "check", "a.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "CN101" in proc.stdout, proc.stderr
    assert "the project ran" not in proc.stderr
