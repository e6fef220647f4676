"""Entries that misbehave as processes: validate ends everything they start, keeps its own pipes
to itself, and caps each run's output and memory with a clear ERROR.

The runs use the CPU redirect (no emulator build) and no golden run, to stay quick.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, _runner, run_validation

from validate_helpers import copy_with_patches

# build() double-forks a daemon that leaves the session (it inherits validate's record pipe,
# which kept validate waiting until its timeout), and reads stdin (which was the pipe the
# reference's weights come in on).
DAEMON = '''def build():
    import os, sys, time
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.path.join(os.path.dirname(__file__), "daemon.pids"), "a") as fh:
                fh.write(f"{os.getpid()}\\n")
            time.sleep(3600)
        os._exit(0)
    os.waitpid(pid, 0)
    assert sys.stdin.read() == ""
'''
# Issue 44: a child that leaves the session *and* drops its token (a new, empty environment),
# orphaned when its run's worker exits first (here at once, skipping the worker's own cleanup),
# was found by no route and outlived validate. It holds the run's stdout and stderr (validate
# then waited 20 s to read them to the end before it killed it).
TOKENLESS = '''def build():
    import os, subprocess
    marker = os.path.join(os.path.dirname(__file__), "tokenless.pids")
    proc = subprocess.Popen(["/bin/sh", "-c", 'echo $$ >> "$1"; exec sleep 3600', "sh", marker],
                            env={}, start_new_session=True)
    import time
    while not os.path.exists(marker):
        time.sleep(0.01)
    os._exit(3)
'''
FLOOD = '''def build():
    import sys
    for _ in range(64):
        sys.stdout.write("x" * (1 << 16) + "\\n")
'''
HOG = '''def build():
    import time
    hog = b"a" * (1200 << 20)
    time.sleep(60)
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _run(mlp: Path, tmp_path: Path, body: str, both: bool, **kw):
    patch = (("entry.py", "def build():\n", body + "    return _real_build()\n\n\ndef _real_build():\n"),)
    original = copy_with_patches(mlp / "original", tmp_path / "original", patch if both else ())
    port = copy_with_patches(mlp / "port", tmp_path / "port", patch)
    request = ValidateRequest(original=original, port=port, mode="entry", entry="entry:build", golden=False,
                              port_device="cpu", steps=1, **kw)
    t0 = time.monotonic()
    return run_validation(request), time.monotonic() - t0, (original, port)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process tracking reads /proc")
def test_a_double_forked_daemon_is_killed_and_does_not_hold_the_run(mlp, tmp_path):
    result, seconds, trees = _run(mlp, tmp_path, DAEMON, both=True, timeout=90.0)
    assert result.verdict in (Verdict.PASS, Verdict.WARN), result.failures
    assert seconds < 80  # not the timeout: the daemon's copy of the record pipe did not keep it open
    pids = [int(p) for tree in trees for p in (tree / "daemon.pids").read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process tracking reads /proc")
def test_a_child_that_leaves_the_session_and_drops_its_token_ends_with_validate(mlp, tmp_path, monkeypatch):
    # Alive when the runs were over (only the last sweep, as validate returned, killed it): it
    # held the port's stdout and stderr, and validate waited 5 s per stream, twice, to read them to the end.
    alive_when_runs_ended: list[int] = []
    real = _runner._run_validation

    def runs_then_look(*args, **kw):
        result = real(*args, **kw)
        alive_when_runs_ended.extend(p for p in map(int, (port / "tokenless.pids").read_text().split()) if _alive(p))
        return result

    port = tmp_path / "port"
    monkeypatch.setattr(_runner, "_run_validation", runs_then_look)
    result, _, trees = _run(mlp, tmp_path, TOKENLESS, both=False, timeout=90.0)
    failure = next(f for f in result.failures if f.role == "port")
    assert (result.verdict, failure.kind, failure.message) == (
        Verdict.ERROR, "crash", "exited with status 3 without a result"), failure
    assert not alive_when_runs_ended
    pids = [int(p) for p in (trees[1] / "tokenless.pids").read_text().split()]
    assert pids
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = [p for p in pids if _alive(p)]
    for p in leftover:  # never leave one behind for the next test, whatever this one says
        os.kill(p, 9)
    assert not leftover


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process tracking reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_validate_killed_with_a_signal_leaves_no_temp_folder(mlp, tmp_path, sig):
    """SIGTERM ended validate on the spot (Python's default) and every run's temp folder stayed."""
    patch = (("entry.py", "def build():\n", "def build():\n    import time\n    time.sleep(120)\n"),)
    original = copy_with_patches(mlp / "original", tmp_path / "original", patch)
    port = copy_with_patches(mlp / "port", tmp_path / "port", patch)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    # Trap: a suite started in the background of a non-interactive shell (`nohup ... &`) inherits
    # SIGINT ignored, and so did validate — it never saw the SIGINT and the test waited 60 s. A
    # user's validate in such a job ignores Ctrl-C too, as any program there does; here it is a
    # foreground program.
    proc = subprocess.Popen([sys.executable, "-m", "cuda2neuron", "validate", str(original), str(port),
                             "--entry", "entry:build", "--no-golden", "--port-device", "cpu", "--steps", "1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not list(tmp.glob("cuda2neuron-validate-runs-*/*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # the runs are under way
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert not list(tmp.glob("cuda2neuron-validate-*")), err.decode()[-2000:]


@pytest.mark.parametrize(
    ("body", "kw", "kind", "words"),
    [
        pytest.param(FLOOD, {"max_output": 1 << 20}, "output", "more than 1 MiB of output", id="output-flood"),
        pytest.param(HOG, {"max_memory": 900 << 20}, "memory", "more than 900 MiB of memory", id="memory-hog"),
    ],
)
def test_a_run_over_its_cap_is_an_error_naming_the_cap(mlp, tmp_path, body, kw, kind, words):
    result, seconds, _ = _run(mlp, tmp_path, body, both=False, timeout=120.0, **kw)
    assert result.verdict is Verdict.ERROR and result.exit_code == 2
    failure = next(f for f in result.failures if f.role == "port")
    assert failure.kind == kind and words in failure.message, failure
    assert seconds < 100  # stopped when over, not at the timeout
