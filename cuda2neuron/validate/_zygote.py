"""validate's runs forked from a process that has imported torch already (the zygote).

A fresh interpreter per run spent ~1.2-1.6 CPU-s importing torch, up to five times per validate
(reference, port, golden, logic pair; more with --nproc): half the CPU of a small validation.
One zygote per validate call imports torch and the worker's modules once; each run is a fork of
it (_zygote_server.py), set up as the fresh interpreter would have been.

Why a zygote of our own, relaying each run's exit status, and not:
* ``multiprocessing``'s forkserver: a process-wide singleton (a caller or the user's code that
  uses it would share ours), it reaps a child the moment it exits (validate could signal a
  reused pid) and it starts a resource tracker besides;
* ``clone(CLONE_PARENT)`` (the runs validate's own children, waited on directly): a raw clone
  behind glibc's back leaves glibc's cached thread id of the child wrong (``raise``,
  ``pthread_kill`` aim at the zygote) — not something to build a user's run on.

The handle, `ForkedProcess`, is what ``subprocess.Popen`` is to validate: pid, stdout, stderr,
poll, wait(timeout), returncode (negative for a signal), send_signal, kill. The zygote reports a
run's end with ``waitid(WNOWAIT)`` and reaps it only when validate has seen the status, so the
pid (and the run's process group) cannot be reused under validate's kill_tree, as with Popen.

Lifecycle (_procs.py): the zygote dies with validate (PR_SET_PDEATHSIG), each run with the
zygote; the zygote carries a token of validate's Reaper prefix, so a ``kill -9`` of validate
leaves neither behind. When anything does not hold — not Linux, the zygote fails to start, has
more than one thread, cannot rewrite its environment block — validate starts the runs the
old way (``CUDA2NEURON_VALIDATE_FORK=0`` asks for that way outright).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from cuda2neuron.validate._procs import _stat

__all__ = ["FORK_VAR", "ForkedProcess", "Zygote", "ZygoteError", "close_shared", "fork_wanted", "shared_zygote",
           "zygote_token"]

FORK_VAR = "CUDA2NEURON_VALIDATE_FORK"
# As _runner._BOOT: the caller's folder off sys.path before anything is imported.
BOOT = ("import sys; getattr(sys.flags, 'safe_path', False) or sys.path.pop(0); "
        "from cuda2neuron.validate._zygote_server import main; main(sys.argv[1:])")
# Room in the zygote's token slot for each run's token ("<prefix>.<n>", written over it).
_SLOT = 64
_MAX_MESSAGE = 1 << 22
# Variables a caller's environment changes from call to call that neither the interpreter nor
# the zygote's imports read: the shared zygote is kept across a change of them (each run gets
# the caller's whole environment anyway, _zygote_server._become_run). Trap: pytest sets
# PYTEST_CURRENT_TEST for every phase of every test, so a test suite that validates in each of
# its tests started a zygote — torch and torch._dynamo imported, ~2 CPU-s — per test (only
# torch.testing._internal reads it, never preloaded).
_PER_CALL_VARS = ("PYTEST_CURRENT_TEST",)


# The process-wide zygote (shared_zygote) and the environment it was started with.
_shared: tuple[dict[str, str], Zygote] | None = None
_shared_lock = threading.Lock()
_exit_hook: list[bool] = []


class ZygoteError(Exception):
    """The zygote cannot start this run (validate starts it the old way)."""


def fork_wanted() -> bool:
    return (os.environ.get(FORK_VAR, "1").strip() not in ("0", "false", "no", "off")
            and sys.platform.startswith("linux") and os.path.isdir("/proc") and hasattr(socket, "send_fds"))


def zygote_token(reaper_token: str) -> str:
    """The zygote's token: of the Reaper's prefix, padded so that every run's token fits its slot."""
    return reaper_token + "." + "0" * _SLOT


def shared_zygote(env: dict[str, str], stderr_path: Path, timeout: float) -> tuple[Zygote | None, str]:
    """The process-wide zygote for runs whose shared environment is ``env``: the one the last
    call started while it lives and ``env`` is the same (but for `_PER_CALL_VARS`), else a new
    one (the old one ended).

    Reused across validate calls because its start — importing torch, ~1.5 CPU-s and as much
    wall time before the first run can fork — is the same every time: a test suite or a
    notebook that validates many ports pays it once. Only for calls on the main thread: a
    zygote dies with the thread that started it (PR_SET_PDEATHSIG follows the thread), and a
    thread's end must not kill another call's runs. It carries a token of its own, not of a
    call's Reaper; when the process dies it dies with it, and ``close_shared`` (at exit) ends it."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            key, zygote = _shared
            if key == _zygote_key(env) and zygote.alive():
                return zygote, ""
            _shared = None
            zygote.close()
        from cuda2neuron.validate._procs import TOKEN_VAR, new_token

        # cwd "/": the zygote outlives the folder of the call that started it.
        zygote, why = Zygote.start({**env, TOKEN_VAR: zygote_token(new_token())}, Path("/"), stderr_path, timeout)
        if zygote is not None:
            _shared = (_zygote_key(env), zygote)
            if not _exit_hook:
                import atexit

                atexit.register(close_shared)
                _exit_hook.append(True)
        return zygote, why


def _zygote_key(env: dict[str, str]) -> dict[str, str]:
    """What of the runs' shared environment decides whether a zygote serves them."""
    return {k: v for k, v in env.items() if k not in _PER_CALL_VARS}


def close_shared() -> None:
    """End the process-wide zygote, if there is one (its runs have all ended by then)."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared[1].close()
            _shared = None


class ForkedProcess:
    """A run forked by the zygote, handled like ``subprocess.Popen``."""

    def __init__(self, zygote: Zygote, pid: int, args: Any, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self.pid = pid
        self.args = args
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._zygote = zygote
        self._done = threading.Event()
        self._code = 0

    def _finish(self, code: int) -> None:
        self._code = code
        self._done.set()

    def poll(self) -> int | None:
        if self.returncode is None and self._done.is_set():
            self.returncode = self._code
            self._zygote.reap(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.poll()  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # after its status is read the pid may be someone else's
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """One zygote and the runs it forked; `start` it, `spawn` runs, `close` it at the end."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.proc = proc
        self.sock = sock
        self.usable = True  # False once it refused a run: the rest start the old way too
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._lock = threading.Lock()  # one spawn (request and answer) at a time
        self._send_lock = threading.Lock()
        self._runs: dict[int, ForkedProcess] = {}
        self._early: dict[int, int] = {}  # exits reported before their handle was made
        self._table = threading.Lock()
        self._lost = False
        self._reader = threading.Thread(target=self._read, daemon=True, name="cuda2neuron-zygote")

    @classmethod
    def start(cls, env: dict[str, str], cwd: Path, stderr_path: Path, timeout: float) -> tuple[Zygote | None, str]:
        """A ready zygote, or None and why not (validate then starts its runs the old way)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(stderr_path, "wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-c", BOOT, str(theirs.fileno()), str(os.getpid())],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    cwd=str(cwd), env=env, start_new_session=True,
                )
        except OSError as exc:
            ours.close()
            return None, f"cannot start: {exc}"
        finally:
            theirs.close()
        ours.settimeout(timeout)
        try:
            hello = json.loads(ours.recv(_MAX_MESSAGE) or b"{}")
        except (OSError, ValueError) as exc:  # socket.timeout is an OSError
            hello = {"reason": f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else str(exc)}
        if not hello.get("ready"):
            ours.close()
            _end(proc)
            reason = hello.get("reason") or f"exited with status {proc.returncode}"
            return None, f"{reason}" + _tail(stderr_path)
        ours.settimeout(None)
        zygote = cls(proc, ours)
        zygote._reader.start()
        return zygote, ""

    def spawn(self, config: str, env: dict[str, str], cwd: Path, token: str, fds: tuple[int, int],
              args: Any = None, timeout: float = 120.0) -> ForkedProcess:
        """Fork one run: ``config`` is the worker's JSON (its pipes are ``fds``: record write end,
        frames read end, renumbered in the run), ``env`` its whole environment."""
        if not self.usable or self._lost:
            raise ZygoteError("the zygote is not usable")
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        message = json.dumps({"op": "spawn", "config": config, "env": env, "cwd": str(cwd), "token": token}).encode()
        try:
            with self._lock:
                try:
                    with self._send_lock:
                        socket.send_fds(self.sock, [message], [out_w, err_w, *fds])
                except OSError as exc:
                    raise ZygoteError(f"the zygote is gone: {exc}") from None
                finally:
                    os.close(out_w)
                    os.close(err_w)
                try:
                    reply = self._replies.get(timeout=timeout)
                except queue.Empty:
                    reply = None
                if reply is None or "spawned" not in reply:
                    self.usable = False
                    raise ZygoteError((reply or {}).get("error", "the zygote did not answer"))
                pid = int(reply["spawned"])
                with self._table:
                    proc = ForkedProcess(self, pid, args, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))
                    self._runs[pid] = proc
                    if pid in self._early:
                        proc._finish(self._early.pop(pid))
                return proc
        except BaseException:
            for fd in (out_r, err_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            raise

    def reap(self, pid: int) -> None:
        self._send({"op": "reap", "pid": pid})

    def _send(self, message: dict[str, Any]) -> None:
        try:
            with self._send_lock:
                self.sock.send(json.dumps(message).encode())
        except OSError:
            pass  # the zygote is gone: its runs went with it

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if "exit" in message:
                pid, code = int(message["exit"]), int(message["code"])
                with self._table:
                    run = self._runs.get(pid)
                    if run is None:
                        self._early[pid] = code
                if run is not None:
                    run._finish(code)
            else:
                self._replies.put(message)
        self._lost = True
        self._replies.put(None)
        self._outlive()

    def _outlive(self) -> None:
        """The zygote died (killed from outside): each run dies with it (PR_SET_PDEATHSIG, SIGKILL)
        and is reaped by whoever inherited it. Its status is that kill, once it is gone."""
        while True:
            with self._table:
                left = [r for r in self._runs.values() if not r._done.is_set()]
            if not left:
                return
            for run in left:
                if _stat(str(run.pid)) is None:
                    run._finish(-signal.SIGKILL)
            time.sleep(0.05)

    def alive(self) -> bool:
        """Still able to fork runs: running, its socket open, and it never refused one."""
        return self.usable and not self._lost and self.proc.poll() is None

    def close(self) -> None:
        """End the zygote (every run it forked that still lives is killed with it)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        _end(self.proc)


def _end(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return f" ({text.splitlines()[-1]})" if text else ""
