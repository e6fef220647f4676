"""The processes of one validate run, found and ended together: what the user's code started too.

Each run's worker starts a new session (``start_new_session``), so its process group holds what
the user's code forks. That is not enough: a daemon double-forks and calls ``setsid`` to leave
its session, and a child that outlives the worker is re-parented to init. Three marks find them
all, on Linux:

* the session: every process whose session id is the worker's;
* descent: the worker makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``), so while
  it lives every orphan of the user's code is re-parented to it, not to init;
* a token: each run's environment carries ``CUDA2NEURON_VALIDATE_RUN=<random>``, which a
  ``setsid`` daemon inherits (only code that empties its environment on purpose drops it).

If validate itself is killed (``kill -9``), its workers die with it (``PR_SET_PDEATHSIG``) and
a ``Reaper`` — a small process started with the runs, in a session of its own — kills whatever
still carries one of the runs' tokens.

``kill_tree`` stops every member first (SIGSTOP: nothing forks while it is counted) and then
kills them, and repeats until none is left. ``resident_memory`` sums their resident memory for
the per-run memory cap. Elsewhere than Linux (no /proc) a run is its process group only.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time

__all__ = ["TOKEN_VAR", "Reaper", "become_subreaper", "children", "die_with_parent", "kill_adopted", "kill_tree",
           "members", "new_token", "stop_subreaper",
           "resident_memory", "snapshot"]

TOKEN_VAR = "CUDA2NEURON_VALIDATE_RUN"
_PROC = "/proc"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def new_token() -> str:
    return secrets.token_hex(12)


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children (not init's)."""
    return _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def stop_subreaper() -> None:
    _prctl(36, 0)


def children() -> set[int]:
    """The live children of this process."""
    if not os.path.isdir(_PROC):
        return set()
    me = os.getpid()
    return {pid for pid, st in snapshot().items() if st[0] == me}


def kill_adopted(before: set[int], rounds: int = 10) -> list[int]:
    """Kill the children this process (a child subreaper while validate runs) gained that carry
    no run token, and everything below them; the pids killed first.

    A process of a run that left its session *and* dropped its token (``env -i``, a new
    environment) is found by no other route once its run's worker has exited: the kernel hands
    it to the nearest subreaper — validate — and it would outlive validate (issue 44: 3 ``sleep``
    per case). Children validate had before the call, and those that carry a token (the zygote,
    a run's worker: ``kill_tree`` ends those), are left alone."""
    if not os.path.isdir(_PROC):
        return []
    me = os.getpid()
    mark = f"{TOKEN_VAR}=".encode()
    killed: list[int] = []
    for _ in range(rounds):
        stats = snapshot()
        below: dict[int, list[int]] = {}
        for pid, st in stats.items():
            below.setdefault(st[0], []).append(pid)
        found: set[int] = set()
        stack = [p for p in below.get(me, ()) if p not in before and not _has_token_prefix(p, mark)]
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.add(pid)
                stack.extend(below.get(pid, ()))
        if not found:
            break
        killed += sorted(found - set(killed))
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        for pid in found:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.01)
    for pid in killed:  # ours to reap now: adopted, no Popen waits for them
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return killed


def _has_token_prefix(pid: int, mark: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as fh:
            return any(e.startswith(mark) for e in fh.read().split(b"\0"))
    except OSError:
        return False


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (validate killed with -9 takes its runs along)."""
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _stat(pid: str) -> tuple[int, int, int, int] | None:
    """(ppid, session, resident pages, start time) of ``pid``; None once it is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # The command name sits in parentheses and may hold spaces and ')': split after the last.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        if fields[0] in (b"Z", b"X"):
            return None  # dead already, only waiting to be reaped
        return int(fields[1]), int(fields[3]), int(fields[21]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _has_token(pid: int, token: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as fh:
            return token in fh.read().split(b"\0")
    except OSError:
        return False


Snapshot = dict[int, tuple[int, int, int, int]]


def snapshot() -> Snapshot:
    """Every live process: pid -> (ppid, session, resident pages, start time)."""
    stats: Snapshot = {}
    for name in os.listdir(_PROC):
        if name.isdigit():
            st = _stat(name)
            if st is not None:
                stats[int(name)] = st
    return stats


def members(leader: int, token: str, stats: Snapshot | None = None) -> dict[int, int]:
    """pid -> resident bytes of every live process of the run whose worker is ``leader``."""
    if not os.path.isdir(_PROC):
        try:
            os.killpg(leader, 0)
        except OSError:
            return {}
        return {leader: 0}
    stats = snapshot() if stats is None else stats
    me = os.getpid()
    mark = f"{TOKEN_VAR}={token}".encode()
    found = {pid for pid, (_, sid, _, _) in stats.items() if sid == leader or pid == leader}
    # Only processes younger than the caller can carry a token it handed out: the environment
    # of the rest (a whole machine's) is never read.
    since = stats[me][3] if me in stats else 0
    found |= {pid for pid, st in stats.items() if pid not in found and pid != me and st[3] >= since
              and _has_token(pid, mark)}
    # Descendants of any member (a subreaper's orphans included).
    children: dict[int, list[int]] = {}
    for pid, st in stats.items():
        children.setdefault(st[0], []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(me)
    return {pid: stats[pid][2] * _PAGE for pid in found}


def resident_memory(leader: int, token: str, stats: Snapshot | None = None) -> int:
    return sum(members(leader, token, stats).values())


def kill_tree(leader: int, token: str, rounds: int = 10) -> None:
    """Kill every process of the run, until none is left: the worker ``leader`` included, unless
    the worker itself is asking (then only what it started)."""
    me = os.getpid()
    for _ in range(rounds):
        pids = [p for p in members(leader, token) if p != me]
        if leader != me:
            try:
                os.killpg(leader, signal.SIGKILL)
            except OSError:
                pass
        if not pids:
            return
        for pid in pids:  # frozen first: a process that forks while counted is counted next round
            _signal(pid, signal.SIGSTOP)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.01)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# The reaper: a tiny process of its own session that outlives validate. It blocks reading a
# pipe whose only write end validate holds; the kernel closes that end however validate ends —
# normally, or killed with -9 — and then the reaper kills every process that carries one of
# this validate's run tokens (the workers die with validate by themselves; a daemon the user's
# code set free would not). Standard library only, no site: it starts in milliseconds.
_REAPER = r"""
import os, signal, sys, time
fd, mark = int(sys.argv[1]), sys.argv[2].encode()
try:
    while os.read(fd, 4096):
        pass
except OSError:
    pass
me = os.getpid()
for _ in range(50):
    victims = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open("/proc/" + name + "/environ", "rb") as fh:
                    if any(e.startswith(mark) for e in fh.read().split(b"\0")):
                        victims.append(int(name))
            except OSError:
                pass
    if not victims:
        break
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
"""


class Reaper:
    """Kills what is left of this validate's runs once validate has ended, however it ended."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._fd: int | None = None
        self._proc = None
        if not os.path.isdir(_PROC):
            return
        import subprocess

        read_end, write_end = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER, str(read_end), f"{TOKEN_VAR}={prefix}."],
                pass_fds=(read_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)
        self._fd = write_end

    def token(self, n: int) -> str:
        return f"{self.prefix}.{n}"

    def pids(self) -> set[int]:
        """The reaper's own pid, while it runs (a child of validate that carries no run token)."""
        return {self._proc.pid} if self._proc is not None else set()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - it ends by itself; never hold validate up
                pass
            self._proc = None
