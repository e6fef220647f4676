"""validate's runs forked from the torch-preloaded zygote (_zygote.py) are the runs a fresh
interpreter gave: same records and verdicts, same process setup as the user's code sees it,
same exit statuses; the zygote is kept for the next call on the main thread (while the runs'
shared environment is the same), ends when it changes or at exit, and with validate when it is killed.

The runs use the CPU redirect (no emulator build) to stay quick.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate import _zygote
from cuda2neuron.validate._zygote import FORK_VAR, ForkedProcess, Zygote

from validate_helpers import copy_with_patches

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zygote forks (Linux only)")

# What the user's code sees of its process, written next to the entry (each tree its own file).
PROBE = '''def build():
    import json, os, signal, sys, tempfile, threading, torch
    token = os.environ["CUDA2NEURON_VALIDATE_RUN"]
    with open("/proc/self/environ", "rb") as fh:
        proc_environ = fh.read().split(b"\\0")
    here = os.path.dirname(os.path.abspath(__file__))
    probe = {
        "session leader": os.getsid(0) == os.getpid() == os.getpgid(0),
        "cwd is the tree": os.getcwd() == here,
        "tempdir is TMPDIR": tempfile.gettempdir() == os.environ["TMPDIR"],
        "hash": hash("cuda2neuron validate"),
        "flags": [sys.flags.dont_write_bytecode, sys.flags.hash_randomization, sys.flags.safe_path,
                  sys.flags.no_site, sys.flags.isolated, sys.flags.ignore_environment],
        "dont_write_bytecode": sys.dont_write_bytecode,
        "unbuffered": [sys.stdout.write_through, sys.stderr.write_through],
        "argv": [os.path.basename(a) for a in sys.argv],
        "path": ["<tree>" if p == os.getcwd() else p for p in sys.path],
        "stdin": sys.stdin.read(),
        "torch threads": torch.get_num_threads(),
        "tasks": len(os.listdir("/proc/self/task")),
        "token in /proc environ": f"CUDA2NEURON_VALIDATE_RUN={token}".encode() in proc_environ,
        "open fds": len(os.listdir("/proc/self/fd")),
        "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGPIPE, signal.SIGCHLD, signal.SIGTERM)],
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "env": {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "CUDA2NEURON_VALIDATE_RUN",
                                                                    "CUDA2NEURON_VALIDATE_FORK")},
        "main": sys.modules["__main__"].__spec__.name,
        "cuda initialised": torch.cuda.is_initialized(),
    }
    with open(os.path.join(here, "probe.json"), "w") as fh:
        json.dump(probe, fh)
'''
# The port ends itself with a signal: validate reports it as the status a killed process has.
SIGTERM_SELF = '''def build():
    import os, signal
    os.kill(os.getpid(), signal.SIGTERM)
'''


def _prepend(body: str) -> tuple[tuple[str, str, str], ...]:
    return (("entry.py", "def build():\n", body + "    return _real_build()\n\n\ndef _real_build():\n"),)


def _validate(mlp: Path, tmp: Path, fork: bool, original: str | None, port: str | None, **kw):
    """One validation, forked or spawned; returns (result, how many runs the zygote forked)."""
    trees = [copy_with_patches(mlp / side, tmp / side, _prepend(body) if body else ())
             for side, body in (("original", original), ("port", port))]
    forked: list[ForkedProcess] = []
    zygotes: list[Zygote] = []
    real_spawn, real_start = Zygote.spawn, Zygote.start.__func__

    def spawn(self, *a, **k):
        proc = real_spawn(self, *a, **k)
        forked.append(proc)
        return proc

    def start(cls, *a, **k):
        zygote, why = real_start(cls, *a, **k)
        assert zygote is not None, why
        zygotes.append(zygote)
        return zygote, why

    _zygote.close_shared()  # this call starts its own zygote, counted here
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(FORK_VAR, "1" if fork else "0")
        mp.setattr(Zygote, "spawn", spawn)
        mp.setattr(Zygote, "start", classmethod(start))
        request = ValidateRequest(original=trees[0], port=trees[1], mode="entry", entry="entry:build",
                                  port_device="cpu", timeout=240.0, **kw)
        result = run_validation(request)
    assert len(zygotes) == fork and all(z.alive() for z in zygotes)  # kept for the next call
    _zygote.close_shared()
    assert all(z.proc.returncode is not None for z in zygotes)  # and ended with close_shared (at exit)
    return result, len(forked), trees


def _counting_starts(monkeypatch) -> list[Zygote]:
    """Forked runs on, no zygote kept from an earlier test; the zygotes started from now on."""
    monkeypatch.delenv(FORK_VAR, raising=False)
    _zygote.close_shared()
    started: list[Zygote] = []
    real_start = Zygote.start.__func__

    def start(cls, *a, **k):
        zygote, why = real_start(cls, *a, **k)
        started.append(zygote)
        return zygote, why

    monkeypatch.setattr(Zygote, "start", classmethod(start))
    return started


def _plain_request(mlp: Path, tmp: Path, **kw) -> ValidateRequest:
    trees = [copy_with_patches(mlp / side, tmp / side, ()) for side in ("original", "port")]
    return ValidateRequest(original=trees[0], port=trees[1], mode="entry", entry="entry:build", port_device="cpu",
                           golden=False, steps=1, timeout=240.0, **kw)


def test_the_next_call_reuses_the_zygote_while_the_environment_is_the_same(mlp, tmp_path, monkeypatch):
    started = _counting_starts(monkeypatch)
    request = _plain_request(mlp, tmp_path)

    def validate(seed: int):
        return run_validation(dataclasses.replace(request, seed=seed))

    try:
        results = [validate(0)]
        # pytest names the test phase in the environment: a suite's next test is the same environment
        monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_other.py::test_next (call)")
        results.append(validate(0))
        assert len(started) == 1 and started[0].alive()  # one zygote for both calls
        results.append(validate(7))  # another hash seed: a zygote of its own, the old one ended
        assert len(started) == 2 and started[0].proc.returncode is not None and started[1].alive()
        assert [r.verdict for r in results] == [Verdict.PASS] * 3, [r.failures for r in results]
        assert repr(results[0].comparisons) == repr(results[1].comparisons)
    finally:
        _zygote.close_shared()
    assert started[1].proc.returncode is not None


@pytest.fixture(scope="module")
def both_ways(mlp, tmp_path_factory):
    return {fork: _validate(mlp, tmp_path_factory.mktemp("fork" if fork else "spawn"), fork, PROBE, PROBE,
                            golden=True, steps=2)
            for fork in (True, False)}


def test_forked_and_spawned_runs_give_identical_records_and_verdicts(both_ways):
    (forked, n_forked, _), (spawned, n_spawned, _) = both_ways[True], both_ways[False]
    assert (n_forked, n_spawned) == (3, 0)  # reference, golden, port: every run forked, or none
    assert forked.verdict is spawned.verdict is Verdict.PASS, (forked.failures, spawned.failures)
    assert forked.comparisons and repr(forked.comparisons) == repr(spawned.comparisons)
    assert [(r.role, r.device, r.records) for r in forked.runs] == [(r.role, r.device, r.records) for r in spawned.runs]
    assert forked.notes == spawned.notes and forked.failures == spawned.failures == ()


@pytest.mark.parametrize("side", ["original", "port"])
def test_the_user_code_sees_the_process_a_fresh_interpreter_gave(both_ways, side):
    forked = json.loads((both_ways[True][2][side == "port"] / "probe.json").read_text())
    spawned = json.loads((both_ways[False][2][side == "port"] / "probe.json").read_text())
    assert forked == spawned
    assert forked["session leader"] and forked["cwd is the tree"] and forked["tempdir is TMPDIR"]
    assert forked["token in /proc environ"] and forked["stdin"] == ""
    assert forked["torch threads"] == forked["tasks"] == 1 and forked["path"][0] == "<tree>"
    assert forked["env"]["PYTHONHASHSEED"] == "0" and forked["env"]["OMP_NUM_THREADS"] == "1"


def test_a_run_killed_by_a_signal_reports_the_same_status_both_ways(mlp, tmp_path):
    messages = []
    for fork in (True, False):
        result, n, _ = _validate(mlp, tmp_path / str(fork), fork, None, SIGTERM_SELF, golden=False, steps=1)
        assert n == (2 if fork else 0)
        failure = next(f for f in result.failures if f.role == "port")
        messages.append((result.verdict, failure.kind, failure.message))
    assert messages[0] == messages[1] == (Verdict.ERROR, "crash", "exited with status -15 without a result")


def test_a_zygote_that_cannot_start_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(_zygote, "BOOT", "import sys; sys.stderr.write('no torch here\\n'); raise SystemExit(3)")
    zygote, why = Zygote.start(dict(os.environ), tmp_path, tmp_path / "zygote.stderr", timeout=60)
    assert zygote is None and "exited with status 3" in why and "no torch here" in why


@pytest.mark.parametrize(("value", "wanted"), [("0", False), ("off", False), ("1", True), (None, True)])
def test_the_escape_hatch(monkeypatch, value, wanted):
    if value is None:
        monkeypatch.delenv(FORK_VAR, raising=False)
    else:
        monkeypatch.setenv(FORK_VAR, value)
    assert _zygote.fork_wanted() is wanted


SLEEPER = '''def build():
    import os, time
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pids"), "w") as fh:
        fh.write(f"{os.getpid()} {os.getppid()}")
    time.sleep(3600)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_kill_9_of_validate_leaves_neither_runs_nor_zygote(mlp, tmp_path):
    trees = [copy_with_patches(mlp / side, tmp_path / side, _prepend(SLEEPER)) for side in ("original", "port")]
    program = (f"from pathlib import Path\nfrom cuda2neuron.validate import ValidateRequest, run_validation\n"
               f"run_validation(ValidateRequest(original=Path({str(trees[0])!r}), port=Path({str(trees[1])!r}), "
               f"mode='entry', entry='entry:build', port_device='cpu', golden=False, steps=1))\n")
    env = {k: v for k, v in os.environ.items() if k != FORK_VAR}
    validate = subprocess.Popen([sys.executable, "-c", program], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while not all((t / "pids").exists() and (t / "pids").read_text() for t in trees):
            assert time.monotonic() < deadline and validate.poll() is None, "the runs never started"
            time.sleep(0.1)
        runs, parents = zip(*(map(int, (t / "pids").read_text().split()) for t in trees))
        (zygote,) = set(parents)  # both runs forked by one zygote, itself validate's child
        with open(f"/proc/{zygote}/stat", "rb") as fh:
            assert int(fh.read().rsplit(b")", 1)[1].split()[1]) == validate.pid
    finally:
        validate.kill()
        validate.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in (*runs, zygote)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in (*runs, zygote) if _alive(p)]


def test_a_call_off_the_main_thread_ends_its_own_zygote(mlp, tmp_path, monkeypatch):
    # A zygote dies with the thread that started it: one started by a worker thread is never shared.
    started = _counting_starts(monkeypatch)
    request = _plain_request(mlp, tmp_path)
    results = []
    thread = threading.Thread(target=lambda: results.append(run_validation(request)))
    thread.start()
    thread.join()
    assert results and results[0].verdict is Verdict.PASS, results and results[0].failures
    assert len(started) == 1 and started[0].proc.returncode is not None
    assert _zygote._shared is None


def test_the_compile_cache_validate_names_is_the_one_torch_would_pick():
    # the runs and the zygote get it in their environment (torch._dynamo's import fixes its caches
    # under TMPDIR otherwise); a copy of torch's choice, so held to torch's own function
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from cuda2neuron.validate._runner import inductor_cache_dir

    assert inductor_cache_dir() == os.path.abspath(default_cache_dir())
