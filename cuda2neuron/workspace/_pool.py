"""Worker processes for a run's files, where one file can never cost the run.

``concurrent.futures.ProcessPoolExecutor`` fails a whole run for one file: a worker that dies
(libcst's native parser overflowing its stack, the kernel's OOM killer) breaks the pool
(``BrokenProcessPool``, culprit unnamed, every result lost), a file that takes an hour holds the
run an hour, and its workers outlive a parent killed with ``kill -9`` (they wait forever on a
queue whose other end their siblings still hold). This pool keeps what each worker is doing:

* each worker is sent a few file indices at a time and answers one result per file, in order,
  so the parent always knows which file a worker is on, and results stream in as files finish;
* a worker that dies is replaced; the file it was on fails, named, with how the worker ended
  (SIGSEGV, SIGKILL …), and the files queued behind it go to the others;
* budgets, per file: a worker past ``Budget.seconds`` on one file, or past ``Budget.memory`` of
  resident memory, is killed, and that file fails as "skipped: too slow" / "skipped: too large";
* each worker dies with its parent: ``PR_SET_PDEATHSIG`` (Linux; elsewhere a thread that
  watches the parent id), and SIGINT is the parent's to handle — it kills the workers.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from cuda2neuron.core import ConfigError, FileError, FileResult, FileStatus

__all__ = ["Budget", "FilePool"]


@dataclass(frozen=True)
class Budget:
    """What one file may cost. ``seconds`` and ``memory`` hold in worker processes (a run of
    16 files or more with more than one job, and any file of 256 KiB or more); ``max_bytes``
    everywhere, before a parse."""

    seconds: float = 120.0
    memory: int = 4 << 30  # bytes of a worker's resident memory
    max_bytes: int = 4 << 20  # a Python file bigger than this is not parsed

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Budget:
        """The defaults, each overridden by its variable: ``CUDA2NEURON_FILE_TIMEOUT`` (seconds),
        ``CUDA2NEURON_FILE_MEMORY`` and ``CUDA2NEURON_FILE_MAX_SIZE`` (MiB)."""
        env = os.environ if environ is None else environ
        base = cls()
        return cls(
            seconds=_number(env, "CUDA2NEURON_FILE_TIMEOUT", base.seconds, 1),
            memory=int(_number(env, "CUDA2NEURON_FILE_MEMORY", base.memory / (1 << 20), 1 << 20) * (1 << 20)),
            max_bytes=int(_number(env, "CUDA2NEURON_FILE_MAX_SIZE", base.max_bytes / (1 << 20), 1 << 20) * (1 << 20)),
        )


def _number(env, name: str, default: float, _unit: int) -> float:
    text = env.get(name)
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"${name}: expected a positive number, got {text!r}")
    return value


# ---------------------------------------------------------------------------------------------
# The worker side


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            _watch_parent(parent)
    else:
        _watch_parent(parent)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _watch_parent(parent: int) -> None:
    import threading

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="cuda2neuron-parent-watch", daemon=True).start()


def _worker_main(conn, parent: int, work: Callable[..., FileResult], files, args: tuple) -> None:  # noqa: ANN001
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends us
    while True:
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        for i in batch:
            result = work(files[i], *args)
            try:
                conn.send((i, result))
            except (OSError, ValueError):
                return


# ---------------------------------------------------------------------------------------------
# The parent side


class _Worker:
    __slots__ = ("proc", "conn", "tasks", "since", "doomed")

    def __init__(self, proc, conn) -> None:  # noqa: ANN001
        self.proc = proc
        self.conn = conn
        self.tasks: deque[int] = deque()  # sent, not yet answered, in the order it works on them
        self.since = time.monotonic()  # when it started on tasks[0]
        self.doomed: tuple[int, FileError] | None = None  # killed over a budget: (file, why)


# In flight per worker: enough that it never waits for the parent between two files.
_DEPTH = 3
_POLL = 0.2


class FilePool:
    """``size`` workers, each answering ``work(files[i], *args)`` for the indices it is sent.

    ``work`` is the caller's (the runner's ``process_file``): the pool knows nothing of what a
    file's processing is, so it imports nothing above it (the runner imports the pool).
    """

    def __init__(self, size: int, work: Callable[..., FileResult], files: Sequence, args: tuple, budget: Budget) -> None:
        import multiprocessing

        self._ctx = multiprocessing.get_context()
        self._size = size
        self._args = (work, files, args)
        self._budget = budget
        self._workers: list[_Worker] = []
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._selector = selectors.DefaultSelector() if os.name != "nt" else None

    def _start(self) -> _Worker:
        parent_end, child_end = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main, args=(child_end, os.getpid(), *self._args),
                                 name="cuda2neuron-worker", daemon=True)
        proc.start()
        child_end.close()
        worker = _Worker(proc, parent_end)
        self._workers.append(worker)
        if self._selector is not None:
            self._selector.register(parent_end.fileno(), selectors.EVENT_READ, worker)
            self._selector.register(proc.sentinel, selectors.EVENT_READ, worker)
        return worker

    def close(self) -> None:
        for w in self._workers:
            if w.proc.is_alive():
                w.proc.kill()
        for w in self._workers:
            w.proc.join()
            w.conn.close()
        self._workers = []
        if self._selector is not None:
            self._selector.close()
            self._selector = None

    def run(self, todo: Sequence[int], path_of) -> Iterator[tuple[int, FileResult]]:  # noqa: ANN001
        """(index, result) for every index of ``todo``, as the files finish."""
        pending = deque(todo)
        try:
            for _ in range(min(self._size, len(pending))):
                self._start()
            last_memory_check = 0.0
            while pending or any(w.tasks for w in self._workers):
                self._feed(pending)
                for w in self._ready():
                    yield from self._collect(w, pending, path_of)
                now = time.monotonic()
                check_memory = now - last_memory_check >= _POLL
                if check_memory:
                    last_memory_check = now
                for w in list(self._workers):
                    why = self._over_budget(w, now, check_memory)
                    if why is not None:
                        w.doomed = (w.tasks[0], why)
                        w.proc.kill()
                        w.proc.join()
                        yield from self._collect(w, pending, path_of)
        finally:
            self.close()

    def _ready(self) -> list[_Worker]:
        """The workers with something to read (a result, or their end), waiting up to _POLL."""
        if self._selector is None:  # Windows: pipes are not selectable there
            from multiprocessing.connection import wait

            handles = {h: w for w in self._workers for h in (w.conn, w.proc.sentinel)}
            ready = wait(list(handles), timeout=_POLL)
            return list({id(handles[h]): handles[h] for h in ready}.values())
        # One selector for the whole run (a new one per wait cost ~50 us a file in the parent).
        events = self._selector.select(timeout=_POLL)
        return list({id(key.data): key.data for key, _ in events if key.data in self._workers}.values())

    def _feed(self, pending: deque[int]) -> None:
        for w in self._workers:
            room = _DEPTH - len(w.tasks)
            if room <= 0 or not pending or w.proc.exitcode is not None:
                continue
            batch = [pending.popleft() for _ in range(min(room, len(pending)))]
            if not w.tasks:
                w.since = time.monotonic()
            w.tasks.extend(batch)
            try:
                w.conn.send(batch)
            except OSError:
                pass  # it died: _collect notices, and its tasks go back to the queue

    def _collect(self, w: _Worker, pending: deque[int], path_of) -> Iterator[tuple[int, FileResult]]:  # noqa: ANN001
        """The results ``w`` has sent; if it has died, the file it died on, and a replacement."""
        dead = False
        while True:
            try:
                if not w.conn.poll():
                    break
                i, result = w.conn.recv()
            except (EOFError, OSError):
                dead = True
                break
            if w.tasks and w.tasks[0] == i:
                w.tasks.popleft()
            w.since = time.monotonic()
            yield i, result
        if not dead and w.proc.exitcode is None:
            return
        w.proc.join()
        self._workers.remove(w)
        if self._selector is not None:
            self._selector.unregister(w.conn.fileno())
            self._selector.unregister(w.proc.sentinel)
        w.conn.close()
        if w.tasks:
            culprit = w.tasks.popleft()
            if w.doomed is not None and w.doomed[0] == culprit:
                error = w.doomed[1]
            else:
                error = FileError("crash", f"skipped: the worker processing this file died ({_how(w.proc.exitcode)}); "
                                           "the other files were processed")
            if w.doomed is None or w.doomed[0] == culprit:
                yield culprit, FileResult(path_of(culprit), FileStatus.FAILED, error=error)
            else:
                w.tasks.appendleft(culprit)  # it had finished the file it was killed for
            pending.extendleft(reversed(w.tasks))
        if pending:
            self._start()

    def _over_budget(self, w: _Worker, now: float, check_memory: bool) -> FileError | None:
        if not w.tasks or w.proc.exitcode is not None:
            return None
        budget = self._budget
        if now - w.since > budget.seconds:
            return FileError("too-slow", f"skipped: too slow (more than {budget.seconds:g} s for this one file; "
                                         "CUDA2NEURON_FILE_TIMEOUT raises the limit)")
        if check_memory:
            rss = self._rss(w.proc.pid)
            if rss is not None and rss > budget.memory:
                return FileError("too-large", f"skipped: too large (more than {budget.memory >> 20} MiB of memory "
                                              "for this one file; CUDA2NEURON_FILE_MEMORY raises the limit)")
        return None

    def _rss(self, pid: int) -> int | None:
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                return int(fh.read().split()[1]) * self._page
        except (OSError, ValueError, IndexError):
            return None  # no /proc (macOS): the time budget still holds


def _how(exitcode: int | None) -> str:
    if exitcode is None:
        return "it stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = {"SIGSEGV": ": the parser crashed on it", "SIGKILL": ": killed, often for lack of memory",
                "SIGABRT": ": aborted, often for lack of memory"}.get(name, "")
        return f"{name}{hint}"
    return f"exit status {exitcode}"
