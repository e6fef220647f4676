"""Run the original and the port side by side and compare them as records stream in.

Three subprocesses run concurrently: the reference (original code, real CUDA or the CUDA-on-CPU
shim), the golden (original code in float64 on the CPU) and the port (migrated code on the
neuron device). Each sends length-prefixed frames through its own pipe; a reader thread per run
feeds one queue, and a record is compared — then dropped — as soon as every live run produced
it. The reference's initial weights are forwarded to the other runs' stdin the moment they
arrive. Nothing is written to disk but each run's stdout/stderr.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any, BinaryIO

from cuda2neuron.validate._audit import audit_from_report
from cuda2neuron.validate._compare import compare_records, noise_elements
from cuda2neuron.validate._hand_edits import hand_edits
from cuda2neuron.validate._localize import localise
from cuda2neuron.validate._model import (
    RunFailure,
    RunInfo,
    TensorComparison,
    Tolerances,
    ValidationResult,
    Verdict,
    worst,
)
from cuda2neuron.validate._request import ValidateRequest
from cuda2neuron.validate._wire import FrameError, read_frame, write_frame
from cuda2neuron.validate._worker_config import WorkerConfig

__all__ = ["ValidateRequest", "run_validation"]

ROLES = ("reference", "golden", "port")
# How progress names the runs (the reference run is "the original" to the user).
_RUN_NAMES = {"reference": "original", "golden": "golden", "port": "port"}


@dataclass
class _Run:
    role: str
    tree: Path
    proc: subprocess.Popen[bytes]
    rfd: int
    stdout_path: Path
    stderr_path: Path
    stdin_q: queue.Queue[Any] = field(default_factory=queue.Queue)
    device: str = "?"
    seconds: float = 0.0
    records: int = 0
    finished: bool = False
    failure: RunFailure | None = None
    audit: dict[str, Any] | None = None


def _spawn(role: str, tree: Path, request: ValidateRequest, workdir: Path) -> _Run:
    rfd, wfd = os.pipe()
    config = WorkerConfig(role=role, tree=tree, fd=wfd, mode=request.mode, entry=request.entry,
                          script=request.script, args=request.args, steps=request.steps, seed=request.seed,
                          port_device=request.port_device)
    tmp = workdir / role
    tmp.mkdir()
    env = dict(os.environ)
    # Each run gets its own TMPDIR: scripts that checkpoint to tempfile.gettempdir() would race.
    env.update(TMPDIR=str(tmp), PYTHONHASHSEED=str(request.seed), OMP_NUM_THREADS="1",
               CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONUNBUFFERED="1",
               # no __pycache__ folders in the user's trees
               PYTHONDONTWRITEBYTECODE="1")
    out_path, err_path = workdir / f"{role}.stdout", workdir / f"{role}.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cuda2neuron.validate._worker", config.to_json()],
            stdin=subprocess.PIPE, stdout=out, stderr=err, pass_fds=(wfd,), cwd=str(tree), env=env,
            start_new_session=True,
        )
    os.close(wfd)
    return _Run(role, tree, proc, rfd, out_path, err_path)


def _reader(run: _Run, q: queue.Queue[tuple[str, Any]]) -> None:
    with os.fdopen(run.rfd, "rb", buffering=1 << 16) as stream:
        try:
            while True:
                frame = read_frame(stream)
                if frame is None:
                    break
                q.put((run.role, frame))
        except (FrameError, EOFError, OSError) as exc:
            q.put((run.role, {"type": "broken", "message": str(exc)}))
    q.put((run.role, None))


def _writer(run: _Run) -> None:
    stdin: BinaryIO = run.proc.stdin  # type: ignore[assignment]
    while True:
        item = run.stdin_q.get()
        if item is None:
            break
        try:
            write_frame(stdin, item)
        except (BrokenPipeError, OSError):
            break
    try:
        stdin.close()
    except OSError:
        pass


def _kill(run: _Run) -> None:
    if run.proc.poll() is None:
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            run.proc.kill()
    run.proc.wait()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class _Comparator:
    """Holds records until every live run has produced them, compares, forgets the tensors."""

    def __init__(self, request: ValidateRequest, ref_on_cuda: list[bool]) -> None:
        self.request = request
        self.live = {"reference", "port"} | ({"golden"} if request.golden else set())
        self.pending: dict[str, dict[str, dict[str, Any]]] = {}
        self.order: dict[str, int] = {}
        self.results: dict[str, TensorComparison] = {}
        self.extra_in_port: list[str] = []
        self.ref_on_cuda = ref_on_cuda
        self.module_classes: dict[str, str] = {}
        # Per parameter ("0:fc.bias"): elements whose gradient was rounding noise at some step.
        self.noisy: dict[str, Any] = {}  # bool tensors

    def add(self, role: str, rec: dict[str, Any]) -> None:
        key = rec["key"]
        if role == "reference":
            self.order.setdefault(key, len(self.order))
            if rec.get("module_path") and rec.get("module_class"):
                self.module_classes.setdefault(rec["module_path"], rec["module_class"])
        self.pending.setdefault(key, {})[role] = rec
        self._try(key)

    def _try(self, key: str, final: bool = False) -> None:
        have = self.pending.get(key, {})
        if not final and not self.live.issubset(have):
            return
        ref = have.get("reference")
        if ref is None:
            if final and "port" in have:
                self.extra_in_port.append(key)
            self.pending.pop(key, None)
            return
        if not final and "port" not in have:
            return
        golden = have.get("golden")
        port = have.get("port")
        name = ref.get("module_path") or ""
        ignore = self.noisy.get(name) if ref["kind"] == "param" else None
        self.results[key] = compare_records(key, ref, port, golden, self.request.tolerances,
                                            self.ref_on_cuda[0], ignore=ignore)
        if ref["kind"] == "grad" and name:
            noisy = noise_elements(ref, golden if golden is not None else port)
            if noisy is not None:
                self.noisy[name] = noisy if name not in self.noisy else self.noisy[name] | noisy
        self.pending.pop(key, None)

    def drop_role(self, role: str) -> None:
        """A run ended: compare what no longer waits for it.

        Only for that run: a key the still-running golden has not sent yet keeps waiting, or the
        port finishing first would judge the last records (the final parameters) without the
        golden, by the stricter reference-only floor.
        """
        self.live.discard(role)
        for key in list(self.pending):
            self._try(key)

    def finish(self, port_complete: bool, ref_complete: bool) -> list[TensorComparison]:
        for key in list(self.pending):
            have = self.pending[key]
            # A record only the reference made counts against the port only if the port finished.
            if "port" in have or (port_complete and ref_complete) or "reference" not in have:
                self._try(key, final=True)
        extra = [
            TensorComparison(key, "extra", -1, None, None, (), None, "-", None, "-", None, float("nan"), float("nan"),
                             float("nan"), None, None, None, 0, Verdict.FAIL, "produced by the port only")
            for key in self.extra_in_port
        ]
        ordered = sorted(self.results.values(), key=lambda c: self.order.get(c.key, 1 << 30))
        return ordered + extra


def _prepare_emulator(request: ValidateRequest, progress: Callable[[str], None]) -> RunFailure | None:
    """Build the emulated device before the clock starts: a cold build (tens of seconds, under a
    file lock shared with other processes) must not eat the runs' timeout."""
    if request.port_device != "neuron" or importlib.util.find_spec("torch_neuronx") is not None:
        return None
    progress("preparing the emulated neuron device ...")
    try:
        from cuda2neuron import backend

        backend.build(progress=progress)  # the build's start/end lines, shown like validate's own
    except Exception as exc:  # noqa: BLE001 - no compiler, unsupported torch: one clear error
        return RunFailure("port", "setup", f"the emulated neuron device cannot be built: {exc}")
    return None


def run_validation(request: ValidateRequest, on_progress: Callable[[str], None] | None = None) -> ValidationResult:
    """Run and compare; ``on_progress`` is told, in a few words, what is happening now."""
    progress = on_progress or (lambda _what: None)
    request = dataclasses.replace(request, original=request.original.resolve(), port=request.port.resolve())
    setup_failure = _prepare_emulator(request, progress)
    if setup_failure is not None:
        return ValidationResult(verdict=Verdict.ERROR, mode=request.mode, target=request.target,
                                original=request.original_label or str(request.original),
                                port=request.port_label or str(request.port), golden_used=False,
                                failures=(setup_failure,))
    q: queue.Queue[tuple[str, Any]] = queue.Queue()
    roles = [r for r in ROLES if r != "golden" or request.golden]
    trees = {"reference": request.original, "golden": request.original, "port": request.port}
    workdir = Path(tempfile.mkdtemp(prefix="cuda2neuron-validate-runs-"))
    runs: dict[str, _Run] = {}
    threads: list[threading.Thread] = []
    ref_on_cuda = [False]
    comparator = _Comparator(request, ref_on_cuda)
    classes: dict[str, dict[str, Any]] = {}
    port_classes: list[tuple[str, int, int, tuple[tuple[int, int], ...]]] = []
    notes: list[str] = []
    ties: dict[str, dict[int, list[Any]]] = {}
    t0 = time.perf_counter()
    timed_out: list[str] = []
    try:
        progress(f"running {', '.join(_RUN_NAMES[r] for r in roles[:-1])} and {_RUN_NAMES[roles[-1]]} ...")
        for role in roles:
            runs[role] = _spawn(role, trees[role], request, workdir)
            for target in (_reader, _writer):
                th = threading.Thread(target=target, args=(runs[role], q) if target is _reader else (runs[role],),
                                      daemon=True)
                th.start()
                threads.append(th)
        open_streams = set(roles)
        deadline = t0 + request.timeout
        while open_streams:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                timed_out = sorted(open_streams)
                break
            try:
                role, frame = q.get(timeout=remaining)
            except queue.Empty:
                continue
            run = runs[role]
            if frame is None:
                open_streams.discard(role)
                run.stdin_q.put(None)
                if not run.finished and run.failure is None:
                    run.proc.wait()
                    run.failure = RunFailure(role, "crash", f"exited with status {run.proc.returncode} without a result",
                                             _tail(run.stderr_path))
                comparator.drop_role(role)
                if role == "reference" and run.failure is not None:
                    break  # the original itself fails: nothing to compare against
                continue
            kind = frame["type"]
            if kind == "tensor":
                comparator.add(role, frame)
                run.records += 1
            elif kind == "init_state" and role == "reference":
                for other in roles:
                    if other != "reference":
                        runs[other].stdin_q.put(frame)
            elif kind == "class":
                if role == "reference":
                    classes.setdefault(frame["class"], frame)
                elif role == "port":
                    port_classes.append((frame["file"], frame["start"], frame["end"],
                                         tuple(tuple(r) for r in frame.get("init", ()))))
            elif kind == "ties":
                ties.setdefault(role, {})[frame["root"]] = frame["groups"]
            elif kind == "hello":
                run.device = frame["device"]
                if role == "reference" and frame["device"].startswith("cuda"):
                    ref_on_cuda[0] = True
            elif kind == "audit":
                run.audit = frame["report"]
            elif kind == "done":
                run.finished, run.seconds = True, frame["seconds"]
            elif kind == "error":
                run.failure = RunFailure(role, frame["kind"], frame["message"],
                                         frame["traceback"] or _tail(run.stderr_path))
            elif kind == "broken":
                run.failure = RunFailure(role, "crash", f"record stream broken: {frame['message']}", _tail(run.stderr_path))
    finally:
        for run in runs.values():
            run.stdin_q.put(None)
            _kill(run)
    failures: list[RunFailure] = []
    for role in timed_out:
        failures.append(RunFailure(role, "timeout", f"no result within {request.timeout:g} s (all runs together)",
                                   _tail(runs[role].stderr_path)))
    golden_used = request.golden
    for role in roles:
        fail = runs[role].failure
        if fail is None or role in timed_out:
            continue
        if role == "golden":
            golden_used = False
            notes.append(f"float64 golden run failed ({fail.message}); the port was compared with the reference "
                         "using per-dtype thresholds")
        else:
            failures.append(fail)
    if request.golden and "golden" in timed_out:
        failures = [f for f in failures if f.role != "golden"]
        golden_used = False
        notes.append("float64 golden run timed out; the port was compared with the reference")
    for root, groups in ties.get("reference", {}).items():
        port_groups = ties.get("port", {}).get(root)
        if port_groups is not None and port_groups != groups:
            untied = [", ".join(g) for g in groups if g not in port_groups]
            notes.append(
                f"weights shared in the original are separate parameters in the port ({'; '.join(untied)}): moving a "
                "module to a PrivateUse1 device such as neuron re-creates its parameters module by module, which "
                "unties shared weights — tie them again after .to(...)")
    ref_ok = runs["reference"].finished and runs["reference"].failure is None
    port_ok = runs["port"].finished and runs["port"].failure is None
    comparisons = tuple(comparator.finish(port_ok, ref_ok))
    fallback = request.entry.split(":")[0].replace(".", "/") + ".py" if request.entry else request.script
    divergence = None
    first_fail = next((c for c in comparisons if c.verdict is Verdict.FAIL), None)
    if first_fail is not None and ref_ok:
        divergence = localise(first_fail, request.original, classes, comparator.module_classes, fallback)
        first_files = [f for f in (divergence.class_file, fallback) if f]
        divergence = dataclasses.replace(divergence, hand_edits=hand_edits(request.original, request.port, first_files))
    audit = audit_from_report(runs["port"].audit, str(request.port), port_classes, request.tolerances,
                              "" if runs["port"].audit is not None else
                              f"op accounting unavailable on {runs['port'].device}")
    if audit.available and audit.verdict is not Verdict.PASS and divergence is None and port_ok:
        # Residency alone failed: name the edits made by hand after migrate, the files where
        # work ran on the CPU first (a wrong device string moves everything there).
        cpu_files = [_relative(loc, request.port) for d in audit.cpu_op_details for loc in d.locations]
        first_files = [f for f in (*cpu_files, fallback) if f]
        audit = dataclasses.replace(audit, hand_edits=hand_edits(request.original, request.port, first_files))
    verdicts = [c.verdict for c in comparisons] + ([audit.verdict] if audit.available else [])
    if failures:
        verdict = Verdict.ERROR
    elif not comparisons:
        verdict = Verdict.ERROR
        failures.append(RunFailure("harness", "no-records", "the runs produced no tensors to compare"))
    else:
        verdict = worst(verdicts)
    infos = tuple(
        RunInfo(role, str(runs[role].tree), runs[role].device, runs[role].seconds, runs[role].records) for role in roles
    )
    shutil.rmtree(workdir, ignore_errors=True)
    return ValidationResult(
        verdict=verdict, mode=request.mode, target=request.target,
        original=request.original_label or str(request.original), port=request.port_label or str(request.port),
        golden_used=golden_used, comparisons=comparisons, divergence=divergence, audit=audit,
        failures=tuple(failures), runs=infos, notes=tuple(notes),
    )


def _relative(location: str, tree: Path) -> str | None:
    """``/abs/port/model.py:54`` -> ``model.py`` (None outside the tree)."""
    path = location.rsplit(":", 1)[0]
    try:
        return os.path.relpath(os.path.realpath(path), os.path.realpath(tree)) if os.path.isabs(path) else path
    except ValueError:
        return None
