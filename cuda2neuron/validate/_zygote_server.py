"""The zygote process: torch imported once, each validate run forked from it (see _zygote.py).

Started by validate as ``python -c _zygote.BOOT <socket fd> <validate pid>`` with the runs'
shared environment (PYTHONHASHSEED, OMP_NUM_THREADS=1, PYTHONUNBUFFERED, ...). It imports torch
and the worker's own modules — never activates the emulated backend, never touches CUDA — and
then serves one socket (SOCK_SEQPACKET, one JSON message a packet, descriptors alongside):

* ``{"op": "spawn", ...}`` with four descriptors (stdout, stderr, record pipe, frames pipe):
  fork a run, answer ``{"spawned": pid}`` or ``{"error": why}`` (validate then starts that run
  the old way);
* ``{"op": "reap", "pid": N}``: validate has seen N's status, the zombie may go.

and tells validate ``{"exit": pid, "code": returncode}`` when a run ends — found with
``waitid(WNOWAIT)``, so the run stays a zombie (its pid and process group not reusable) until
validate has read its status, as with a child of its own. When the socket closes (validate is
done, or dead), every run still alive is killed and the zygote exits.

The forked child becomes what ``python -c _runner._BOOT <config>`` would have been: its own
session, its environment, cwd, stdin /dev/null, stdout/stderr and the protocol pipes, the
``sys.path``/``sys.argv`` that boot sets, a fresh ``tempfile.tempdir``; see `_become_run`.

Runs in a process of its own: its stderr is a file validate reads only when it cannot start.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

from cuda2neuron.validate._procs import TOKEN_VAR, die_with_parent
from cuda2neuron.validate._worker_config import WorkerConfig

__all__ = ["main", "write_token"]

# What the worker imports before the user's code runs (its own modules, pure at import): the
# forked runs find them loaded. Not `_worker` itself — runpy runs it as __main__, and a copy in
# sys.modules makes runpy warn on the run's stderr. Not the backend: activating it loads the
# emulator's library and starts device state a fork must not share. torch._dynamo too: each run
# imports it (~1.3 s of CPU: the recorder keeps its hooks out of compiled graphs with it, and every
# optimizer's first step needs it). Trap: its import fixes the compile caches under the importing
# process's TMPDIR unless TORCHINDUCTOR_CACHE_DIR names them — validate names them for the zygote
# and every run alike (`_runner._run_env`), else the forked runs would differ from fresh ones.
PRELOAD = ("numpy", "torch", "torch.nn", "torch.optim", "torch.distributed", "torch._dynamo",
           "cuda2neuron.validate._wire", "cuda2neuron.validate._class_lines", "cuda2neuron.validate._compare",
           "cuda2neuron.validate._recorder",
           "cuda2neuron.validate._rng", "cuda2neuron.validate._cuda_shim", "cuda2neuron.validate._golden",
           "cuda2neuron.validate._accounting", "cuda2neuron.validate._autocast_off", "cuda2neuron.validate._host_api",
           "cuda2neuron.validate._overlay")
_MAX_MESSAGE = 1 << 22
_WORKER = "cuda2neuron.validate._worker"


def _env_block() -> tuple[int, int]:
    """Address range of this process's environment block, the bytes /proc/<pid>/environ shows."""
    with open("/proc/self/stat", "rb") as fh:
        data = fh.read()
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[47]), int(fields[48])  # env_start, env_end (stat fields 50 and 51)


def write_token(token: str) -> bool:
    """Write ``TOKEN_VAR=token`` over the token slot of this process's environment block.

    Trap: a forked process's /proc/<pid>/environ is the block its exec'd ancestor started with
    — replacing os.environ (putenv) never shows there. validate finds a run's processes (and
    the Reaper what is left of them) by the token in that file, so the run writes its own token
    over the zygote's slot, which is padded long enough for it: the rest of the slot becomes
    empty strings. Only this process's copy changes (the page is copied on write)."""
    start, end = _env_block()
    block = ctypes.string_at(start, end - start)
    key = f"{TOKEN_VAR}=".encode()
    if block.startswith(key):
        at = 0
    else:
        at = block.find(b"\0" + key) + 1
        if at == 0:
            return False
    stop = block.index(b"\0", at)
    entry = key + token.encode()
    if len(entry) > stop - at:
        return False
    ctypes.memmove(start + at, entry + b"\0" * (stop - at - len(entry)), stop - at)
    with open("/proc/self/environ", "rb") as fh:
        return entry in fh.read().split(b"\0")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


class _Server:
    def __init__(self, sock: socket.socket, boot_path: list[str]) -> None:
        self.sock = sock
        self.boot_path = boot_path
        self.pid = os.getpid()
        self.live: dict[int, bool] = {}  # pid -> its exit already reported
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def send(self, message: dict[str, Any]) -> None:
        self.sock.send(json.dumps(message).encode())

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        sel.register(self.wake_r, selectors.EVENT_READ)
        try:
            while True:
                for key, _ in sel.select(timeout=1.0):
                    if key.fileobj is self.sock:
                        if not self.handle():
                            return
                    else:
                        try:
                            while os.read(self.wake_r, 512):
                                pass
                        except BlockingIOError:
                            pass
                self.report_exits()
        finally:
            self.shutdown()

    def handle(self) -> bool:
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, _MAX_MESSAGE, 8)
        except ConnectionError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False  # validate closed its end: it is done, or dead
        try:
            request = json.loads(data)
            if request["op"] == "reap":
                pid = int(request["pid"])
                if self.live.pop(pid, None) is not None:
                    try:
                        os.waitpid(pid, 0)
                    except ChildProcessError:
                        pass
            elif request["op"] == "spawn":
                self.spawn(request, fds)
                fds = []
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def spawn(self, request: dict[str, Any], fds: list[int]) -> None:
        try:
            if len(fds) != 4:
                raise RuntimeError(f"spawn needs 4 descriptors, got {len(fds)}")
            threads = _threads()
            if threads != 1:  # a fork copies one thread: another's locks would stay held forever
                raise RuntimeError(f"the zygote has {threads} threads; forking it is unsafe")
            if _cuda_initialised():
                raise RuntimeError("CUDA was initialised in the zygote; a forked run could not use it")
            pid = os.fork()
        except Exception as exc:  # noqa: BLE001 - validate starts this run the old way
            for fd in fds:
                os.close(fd)
            self.send({"error": f"{type(exc).__name__}: {exc}"})
            return
        if pid == 0:
            _become_run(request, fds, self)  # never returns
        for fd in fds:
            os.close(fd)
        self.live[pid] = False
        self.send({"spawned": pid})

    def report_exits(self) -> None:
        for pid, reported in list(self.live.items()):
            if reported:
                continue
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # not ours after all: nothing to wait for
                self.live.pop(pid)
                self.send({"exit": pid, "code": -signal.SIGKILL, "lost": True})
                continue
            if info is None:
                continue
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            self.live[pid] = True
            self.send({"exit": pid, "code": code})

    def shutdown(self) -> None:
        """validate is gone: what it started goes with it (each run is a session of its own)."""
        for pid in self.live:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for pid in self.live:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _become_run(request: dict[str, Any], fds: list[int], server: _Server) -> None:
    """In the forked child: turn into the run ``python -c _BOOT <config>`` would have started,
    run the worker, and leave through os._exit — never back into the zygote's loop."""
    code = 1
    try:
        zygote = server.pid
        die_with_parent(zygote)  # before anything else: the zygote dies with validate, the run with it
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        if not write_token(request["token"]):
            raise RuntimeError("cannot write the run's token into its environment block")
        out, err, records, frames = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        keep = {0, 1, 2, records, frames}
        for name in os.listdir("/proc/self/fd"):  # Popen's close_fds: the zygote's socket, its stderr file
            fd = int(name)
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in (records, frames):
            os.set_inheritable(fd, True)  # as pass_fds leaves them; the worker takes them back
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        config = WorkerConfig.from_json(request["config"])
        config = dataclasses.replace(config, fd=records, in_fd=frames, parent=zygote)
        sys.path[:] = server.boot_path
        sys.argv = ["-c", config.to_json()]
        import tempfile

        tempfile.tempdir = None  # TMPDIR is the run's own
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
        import runpy

        sys.modules.pop(_WORKER, None)
        runpy.run_module(_WORKER, run_name="__main__", alter_sys=True)
        code = 0  # the worker leaves through os._exit; falling through is a plain end
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as the interpreter ends on one: killed by SIGINT
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - an uncaught exception: traceback on stderr, status 1
        traceback.print_exc()
        code = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            pass
        _flush()
        os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        sys.stderr.write(f"{exc.code}\n")
    except (OSError, ValueError):
        pass
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[0]))
    die_with_parent(int(argv[1]))
    boot_path = list(sys.path)  # as _BOOT leaves it: the caller's folder already taken off
    try:
        if not sys.platform.startswith("linux"):
            raise RuntimeError("the zygote needs Linux (/proc, fork)")
        import importlib

        for name in PRELOAD:
            importlib.import_module(name)
        # No gc.freeze(): the runs' collector would then never see the preloaded objects
        # (gc.get_objects() without them), which a fresh interpreter's does.
        sys.path[:] = boot_path
        threads = _threads()
        if threads != 1:
            raise RuntimeError(f"{threads} threads after importing torch")
        if _cuda_initialised():
            raise RuntimeError("importing torch initialised CUDA")
        if not write_token(os.environ.get(TOKEN_VAR, "")):
            raise RuntimeError("this system does not let a process rewrite its environment block")
    except BaseException as exc:  # noqa: BLE001 - validate falls back to starting each run itself
        traceback.print_exc()
        sock.send(json.dumps({"ready": False, "reason": f"{type(exc).__name__}: {exc}"}).encode())
        return
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    _Server(sock, boot_path).serve()
