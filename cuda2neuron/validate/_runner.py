"""Run the original and the port side by side and compare them as records stream in.

Three subprocesses run concurrently: the reference (original code, real CUDA or the CUDA-on-CPU
shim), the golden (original code in float64 on the CPU) and the port (migrated code on the
neuron device). Each sends length-prefixed frames through its own pipe; a reader thread per run
feeds one queue, and a record is compared — then dropped — as soon as every live run produced
it. The reference's initial weights are forwarded to the other runs (on a pipe of their own) the moment they
arrive. Nothing is written to disk but each run's stdout/stderr.

Distributed (`nproc` > 1): each of the three runs is N rank processes started the way torchrun
starts them (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT in the environment), and each
run has its own rendezvous port, so the three groups never meet. Rank r of the port is compared
with rank r of the reference: every record key starts with ``rank<r>/``, so a divergence names
the rank.
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import importlib.util
import itertools
import os
import queue
import re
import shutil
import socket
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
from cuda2neuron.validate._compare import below_port_error, compare_records, noise_elements, to_tensor
from cuda2neuron.validate._hand_edits import hand_edits
from cuda2neuron.validate._kinks import KINKED, flipped_kinks
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
from cuda2neuron.validate._procs import (
    TOKEN_VAR, Reaper, become_subreaper, children, kill_adopted, kill_tree, new_token, resident_memory, snapshot,
    stop_subreaper,
)
from cuda2neuron.validate._wire import FrameError, read_frame, write_frame
from cuda2neuron.validate._worker_config import SKIPPED_STEPS_CAP, WorkerConfig
from cuda2neuron.validate._zygote import ForkedProcess, Zygote, ZygoteError, fork_wanted, shared_zygote, zygote_token

__all__ = ["ValidateRequest", "run_validation"]

ROLES = ("reference", "golden", "port")
# How progress names the runs (the reference run is "the original" to the user).
_RUN_NAMES = {"reference": "original", "golden": "golden", "port": "port",
              "logic-reference": "original with autocast off", "logic-port": "port with autocast off"}
#: Autocast dtypes that make the original's run a reduced-precision one (the logic pair then runs).
_REDUCED = ("float16", "bfloat16")


@dataclass
class _Run:
    role: str
    rank: int | None  # None: a single, non-distributed process
    tree: Path
    proc: subprocess.Popen[bytes] | ForkedProcess
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
    ties: dict[int, list[Any]] = field(default_factory=dict)
    # Device indices the run's model tensors lived on ("neuron:1" -> 1): one per rank, distinct.
    devices: dict[int | None, str] = field(default_factory=dict)
    # Killed by validate because another rank of the same run failed: its own end is no news.
    aborted: bool = False
    # Process lifecycle (_procs.py): the token every process of this run inherits, the pipe the
    # parent writes frames to (not the run's stdin: user code may read that), and why validate
    # ended the run itself (over its memory or output cap), which outranks how it ended.
    token: str = ""
    frames_out: BinaryIO | None = None
    limit: RunFailure | None = None
    output_bytes: int = 0
    copiers: list[threading.Thread] = field(default_factory=list)

    @property
    def name(self) -> str:
        """How reports name this process: "port", or "port rank 1" in a distributed run."""
        return self.role if self.rank is None else f"{self.role} rank {self.rank}"


# torchrun's per-worker variables (and the launcher's own): a distributed run gets fresh values,
# the ones validate itself inherited (validate started from a torchrun shell) never leak in.
_LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
                "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                "TORCHELASTIC_USE_AGENT_STORE")


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on the loopback interface, one rendezvous per run.

    All sockets stay bound until every port is known, so the same port is never handed out
    twice; the short window between closing and the rank's bind is the one torchrun has too.
    """
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _launch_env(rank: int, world: int, master_port: int) -> dict[str, str]:
    """The environment torchrun gives one worker of a single-node job."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world),
            "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port),
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
            "TORCHELASTIC_RUN_ID": "cuda2neuron-validate", "TORCHELASTIC_USE_AGENT_STORE": "False"}


# The worker is started through this, not `-m`: `-m` and `-c` put the working folder (the
# user's tree) first on sys.path, where a `cuda2neuron.py` of theirs would be imported in place
# of validate's own worker. The worker adds the tree back itself, after its own imports.
_BOOT = ("import sys; getattr(sys.flags, 'safe_path', False) or sys.path.pop(0); import runpy; "
         "runpy.run_module('cuda2neuron.validate._worker', run_name='__main__', alter_sys=True)")
# Per run, unless the request says otherwise: output kept (stdout and stderr together).
DEFAULT_MAX_OUTPUT = 64 << 20


def default_max_memory() -> int:
    """Resident memory one run (all its processes) may use: half the machine's memory shared
    by the three runs, at least 2 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 << 30
    return max(2 << 30, total // 2 // 3)


def _run_env(request: ValidateRequest) -> dict[str, str]:
    """What every run's environment sets, the zygote's too: these are read when the interpreter
    starts (hash seed, unbuffered streams, no bytecode) or torch loads (OMP_NUM_THREADS)."""
    env = dict(PYTHONHASHSEED=str(request.seed), OMP_NUM_THREADS="1", CUBLAS_WORKSPACE_CONFIG=":4096:8",
               PYTHONUNBUFFERED="1",
               PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ folders in the user's trees
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        # torch._dynamo's import fixes its compile caches under the importing process's temporary
        # folder (and sets this variable): named here, the zygote that imported it and the runs
        # forked from it agree with a run started fresh, each with its own TMPDIR.
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir()
    return env


def inductor_cache_dir() -> str:
    """The compile cache torch uses when the user names none (torch._inductor's
    `default_cache_dir()`, whose import costs 0.9 s of CPU in the parent): shared by every
    process of the user, as outside validate."""
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def _start_zygote(request: ValidateRequest, workdir: Path, token: str) -> tuple[Zygote | None, bool]:
    """The process the runs are forked from (_zygote.py) and whether it is the process-wide one
    (kept for the next call), or None: the runs start as fresh interpreters
    (CUDA2NEURON_VALIDATE_FORK=0, not Linux, or the zygote cannot start)."""
    if not fork_wanted():
        return None, False
    env = dict(os.environ)
    for var in _LAUNCH_VARS:  # each run sets its own; none is read while torch imports
        env.pop(var, None)
    env.update(**_run_env(request))
    timeout = min(request.timeout, 300.0)
    if threading.current_thread() is threading.main_thread():
        return shared_zygote(env, workdir / "zygote.stderr", timeout)[0], True
    tmp = workdir / "zygote"
    tmp.mkdir()
    env.update(TMPDIR=str(tmp), **{TOKEN_VAR: zygote_token(token)})
    return Zygote.start(env, tmp, workdir / "zygote.stderr", timeout=timeout)[0], False


def _taken_steps(role: str, request: ValidateRequest) -> int | None:
    """Steps the run takes before it stops, the ones the original's GradScaler skipped not
    counted; None: every step. The logic pair runs the first ``logic_steps`` (issue 32's cost
    goal; a logic defect is in code every step runs, and what only later steps run — a schedule,
    an eval switch — the precision check still judges over every step)."""
    return request.logic_steps if role in LOGIC_ROLES and request.logic_steps < request.steps else None


def _spawn(role: str, tree: Path, request: ValidateRequest, workdir: Path, rank: int | None = None,
           master_port: int | None = None, token: str | None = None, zygote: Zygote | None = None) -> _Run:
    rfd, wfd = os.pipe()  # records: worker -> validate
    in_r, in_w = os.pipe()  # the reference's frames: validate -> worker
    # A logic run is the reference's or the port's run with autocast forced off.
    config = WorkerConfig(role=role.removeprefix("logic-"), tree=tree, fd=wfd, mode=request.mode,  # type: ignore[arg-type]
                          entry=request.entry, script=request.script, args=request.args, steps=request.steps,
                          seed=request.seed, port_device=request.port_device, in_fd=in_r, parent=os.getpid(),
                          overlay=request.port_overlay if role in ("port", "logic-port") else None,
                          autocast=role not in LOGIC_ROLES, taken_steps=_taken_steps(role, request))
    name = role if rank is None else f"{role}.rank{rank}"
    tmp = workdir / name
    tmp.mkdir()
    env = dict(os.environ)
    if master_port is not None:
        for var in _LAUNCH_VARS:
            env.pop(var, None)
        env.update(_launch_env(rank if rank is not None else 0, request.nproc, master_port))
    # One device count in both worlds: the shim's torch.cuda.device_count() and the emulator's
    # torch.neuron.device_count() read this (the user's own value, else 1 per local rank).
    env["CUDA2NEURON_DEVICE_COUNT"] = os.environ.get("CUDA2NEURON_DEVICE_COUNT") or str(
        request.nproc if master_port is not None else 1)
    token = token or new_token()
    # Each run gets its own TMPDIR: scripts that checkpoint to tempfile.gettempdir() would race.
    env.update(TMPDIR=str(tmp), **_run_env(request), **{TOKEN_VAR: token})
    out_path, err_path = workdir / f"{name}.stdout", workdir / f"{name}.stderr"
    argv = [sys.executable, "-c", _BOOT, config.to_json()]
    proc: subprocess.Popen[bytes] | ForkedProcess | None = None
    try:
        if zygote is not None and zygote.usable:
            try:
                proc = zygote.spawn(argv[-1], env, tree, token, (wfd, in_r), args=argv)
            except ZygoteError:
                proc = None  # this run, and the rest, start the old way
        if proc is None:
            proc = subprocess.Popen(
                argv,
                # /dev/null: user code that reads stdin gets EOF, and never the frames meant for the worker.
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(wfd, in_r),
                cwd=str(tree), env=env, start_new_session=True,
            )
    finally:
        os.close(wfd)
        os.close(in_r)
    run = _Run(role, rank, tree, proc, rfd, out_path, err_path, token=token,
               frames_out=os.fdopen(in_w, "wb"))
    cap = request.max_output if request.max_output is not None else DEFAULT_MAX_OUTPUT
    for stream, path in ((proc.stdout, out_path), (proc.stderr, err_path)):
        th = threading.Thread(target=_copy_output, args=(run, stream, path, cap), daemon=True)
        th.start()
        run.copiers.append(th)
    return run


def _copy_output(run: _Run, stream: BinaryIO, path: Path, cap: int) -> None:
    """The run's stdout or stderr into its file, up to the run's output cap (both streams
    together); past it, the run is ended with an ERROR and the rest is read and dropped."""
    with stream, open(path, "wb") as out:
        while True:
            chunk = stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16)
            if not chunk:
                return
            if run.limit is not None and run.limit.kind == "output":
                continue
            room = cap - run.output_bytes
            run.output_bytes += len(chunk)
            if len(chunk) <= room:
                out.write(chunk)
                continue
            out.write(chunk[: max(room, 0)])
            out.write(f"\n[cuda2neuron validate: output cut at {cap >> 20} MiB]\n".encode())
            out.flush()
            if run.limit is None:
                run.limit = RunFailure(run.name, "output", f"wrote more than {_mib(cap)} of output (stdout and stderr "
                                       "together); validate stopped it — print less, or raise "
                                       "[tool.cuda2neuron.validate] max_output_mb")
            kill_tree(run.proc.pid, run.token)


def _mib(n: int) -> str:
    return f"{round(n / (1 << 20), 1):g} MiB" if n < 1 << 30 else f"{round(n / (1 << 30), 2):g} GiB"


def _watch(runs: Callable[[], list[_Run]], cap: int, stop: threading.Event) -> None:
    """Every half second: a run whose processes together hold more resident memory than
    ``cap`` is ended with an ERROR; a worker that has exited has whatever it left running
    killed (a daemon it started keeps the record pipe open, and validate would wait for it
    until the timeout)."""
    while not stop.wait(0.5):
        stats = None  # one look at the process table per round, for every run
        for run in runs():
            exited = run.proc.poll() is not None
            if exited and not getattr(run, "_swept", False):
                run._swept = True  # type: ignore[attr-defined]
                kill_tree(run.proc.pid, run.token)
                continue
            if exited or run.limit is not None:
                continue
            if stats is None:
                stats = snapshot() if os.path.isdir("/proc") else {}
            used = resident_memory(run.proc.pid, run.token, stats or None)
            if used > cap:
                run.limit = RunFailure(run.name, "memory", f"used more than {_mib(cap)} of memory (all its processes "
                                       f"together: {_mib(used)}); validate stopped it — raise "
                                       "[tool.cuda2neuron.validate] max_memory_mb if the model needs it")
                kill_tree(run.proc.pid, run.token)


def _reader(run: _Run, q: queue.Queue[tuple[_Run, Any]]) -> None:
    with os.fdopen(run.rfd, "rb", buffering=1 << 16) as stream:
        try:
            while True:
                frame = read_frame(stream)
                if frame is None:
                    break
                q.put((run, frame))
        except (FrameError, EOFError, OSError) as exc:
            q.put((run, {"type": "broken", "message": str(exc)}))
    q.put((run, None))


def _writer(run: _Run) -> None:
    out: BinaryIO = run.frames_out  # type: ignore[assignment]
    while True:
        item = run.stdin_q.get()
        if item is None:
            break
        try:
            write_frame(out, item)
        except (BrokenPipeError, OSError, ValueError):
            break
    try:
        out.close()
    except OSError:
        pass


def _kill(run: _Run) -> None:
    """End the run and everything it started (see _procs.py), then reap the worker."""
    kill_tree(run.proc.pid, run.token)
    run.proc.wait()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# The comparisons a record key gets: (check, lead role, follower role), each judged against the
# golden. "precision": the runs as written; "logic": original and port with autocast forced off in
# both, started only when the original runs under reduced-precision autocast (run_validation).
_GROUPS = (("precision", "reference", "port"), ("logic", "logic-reference", "logic-port"))
LOGIC_ROLES = ("logic-reference", "logic-port")
LOGIC_PREFIX = "logic/"


def base_key(key: str) -> str:
    """The record key a comparison is about (``logic/s0/fwd/...`` -> ``s0/fwd/...``)."""
    return key.removeprefix(LOGIC_PREFIX)


class _Comparator:
    """Holds records until every live run has produced them, compares, forgets the tensors.

    A key is compared once per check (`_GROUPS`); the golden's record serves both and is kept
    until both are settled. Until it is known whether the logic pair runs (`logic` None), the
    golden's records are kept for it.
    """

    def __init__(self, request: ValidateRequest, ref_on_cuda: list[bool]) -> None:
        self.request = request
        self.live = {"reference", "port"} | ({"golden"} if request.golden else set())
        self.pending: dict[str, dict[str, dict[str, Any]]] = {}
        self.settled: dict[str, set[str]] = {}
        # (position in its rank's stream, rank): ranks interleave in a fixed order, however their
        # records happened to arrive, so the first divergence is the same from run to run.
        self.order: dict[str, tuple[int, int]] = {}
        self._per_rank: dict[int, int] = {}
        self.results: dict[str, TensorComparison] = {}
        self.extra_in_port: list[str] = []
        self.ref_on_cuda = ref_on_cuda
        self.module_classes: dict[str, str] = {}
        # Per check, per parameter ("0:fc.bias"): elements whose gradient was rounding noise at some step.
        self.noisy: dict[str, dict[str, Any]] = {"precision": {}, "logic": {}}  # bool tensors
        self.devices: dict[str, str] = {}  # role -> the device its hello named
        self.ref_tf32 = False  # the reference's hello: a GPU computing float32 in TF32
        # None: not known yet whether the logic pair runs; True: it runs; False: it does not.
        self.logic: bool | None = None
        # Parameters without a gradient of their own (a momentum / EMA copy, requires_grad=False):
        # each parameter's initial value, to find the one it was copied from (`follows`).
        self.initial: dict[str, tuple[Any, ...]] = {}
        self.graded: set[str] = set()
        # (check, rank) -> (step, module path, count) of the first kink the port took the other way
        # than the golden within its rounding (`_kinks.py`): that step's and later gradients' WARNs
        # are not judged.
        self.kinked: dict[tuple[str, int | None], tuple[int, str, int]] = {}

    def same_kernels(self, check: str = "precision") -> bool:
        """The port on the emulator, the reference on the CPU shim: both run the CPU kernels."""
        lead, follower = ("logic-reference", "logic-port") if check == "logic" else ("reference", "port")
        return (self.devices.get(follower, "").startswith("neuron (cuda2neuron emulator)")
                and self.devices.get(lead, "").startswith("cpu"))

    def add(self, role: str, rec: dict[str, Any]) -> None:
        key = rec["key"]
        if role == "reference" and key not in self.order:
            rank = rec.get("rank", 0)
            self._per_rank[rank] = self._per_rank.get(rank, 0) + 1
            self.order[key] = (self._per_rank[rank], rank)
            if rec.get("module_path") and rec.get("module_class"):
                self.module_classes.setdefault(rec["module_path"], rec["module_class"])
        if key in self.settled and len(self.settled[key]) == len(_GROUPS):
            return  # a late record of a key already judged (a logic run after "no logic")
        self.pending.setdefault(key, {})[role] = rec
        self._try(key)

    def add_initial(self, rank: int | None, frame: dict[str, Any]) -> None:
        """The reference's initial weights of one root: a fingerprint of each parameter."""
        for key, rec in frame["state"].items():
            name = f"{frame['root']}:{key}"
            self.initial[name if rank is None else f"{rank}|{name}"] = (
                tuple(rec["shape"]), rec["dtype"], hashlib.blake2b(memoryview(rec["data"]), digest_size=16).digest())

    def follows(self, name: str) -> str | None:
        """The parameter ``name`` was copied from, when it has no gradient of its own: a momentum
        encoder or an EMA (`copy.deepcopy(model)`, `k.copy_(q)`, then ``k = m*k + (1-m)*q``)
        starts as its source's exact copy. Its update is its source's scaled down, so the
        elements where the source's gradient was rounding noise are noise here too — compared in
        full, a zero-initialised bias copied from a key bias (whose true gradient is zero) read
        as an error of 2. The source at the same path under another root; else the only one."""
        if name in self.graded:
            return None
        print_ = self.initial.get(name)
        if print_ is None:
            return None
        same = [n for n in self.graded if self.initial.get(n) == print_]
        rank, _, path = name.rpartition("|")
        local = path.partition(":")[2]
        at_path = [n for n in same if n.rpartition("|")[0] == rank and n.rpartition("|")[2].partition(":")[2] == local]
        if len(at_path) == 1:
            return at_path[0]
        return same[0] if len(same) == 1 else None

    def set_logic(self, runs: bool) -> None:
        """Whether the logic pair runs: from now on its records are waited for, or never."""
        self.logic = runs
        if runs:
            self.live |= set(LOGIC_ROLES)
        for key in list(self.pending):
            self._try(key)

    def _try(self, key: str, final: bool = False, complete: dict[str, bool] | None = None) -> None:
        have = self.pending.get(key)
        if have is None:
            return
        settled = self.settled.setdefault(key, set())
        for check, lead, follower in _GROUPS:
            if check in settled:
                continue
            if check == "logic" and not self.logic:
                if self.logic is False or final:
                    settled.add(check)
                continue
            if final and complete is not None and follower not in have and lead in have and not (
                    complete.get(lead) and complete.get(follower)):
                # A record only the lead made counts against the follower only if both finished.
                settled.add(check)
                continue
            if self._try_group(key, have, check, lead, follower, final):
                settled.add(check)
                have.pop(lead, None)
                have.pop(follower, None)
        if len(settled) == len(_GROUPS):
            self.pending.pop(key, None)

    def _try_group(self, key: str, have: dict[str, dict[str, Any]], check: str, lead: str, follower: str,
                   final: bool) -> bool:
        """Compare ``key`` for one check when its records are in; True once it is settled."""
        needed = {lead, follower, "golden"} & self.live
        if not final and not needed.issubset(have):
            return False
        ref = have.get(lead)
        if ref is None:
            if not final:
                return lead not in self.live and follower not in have
            if follower in have:
                self.extra_in_port.append(key if check == "precision" else LOGIC_PREFIX + key)
            return True
        if not final and follower not in have:
            return False
        golden = have.get("golden")
        port = have.get(follower)
        # Per rank: an FSDP shard of a parameter differs in shape from rank to rank.
        name = f"{ref['rank']}|{ref.get('module_path') or ''}" if "rank" in ref else ref.get("module_path") or ""
        noisy_masks = self.noisy[check]
        ignore = None
        if ref["kind"] == "param":
            source = self.follows(name)
            ignore = noisy_masks.get(name if source is None else source)
        elif ref["kind"] == "grad":
            self.graded.add(name)
        out_key = key if check == "precision" else LOGIC_PREFIX + key
        result = compare_records(out_key, ref, port, golden, self.request.tolerances, self.ref_on_cuda[0],
                                 ignore=ignore, same_kernels=self.same_kernels(check), ref_tf32=self.ref_tf32,
                                 check=check)
        result = self._kinks(check, ref, port, golden, result)
        self.results[out_key] = result
        if ref["kind"] == "grad" and ref.get("module_path"):
            noisy = noise_elements(ref, golden if golden is not None else port)
            if result.verdict is Verdict.PASS:
                # The gradient passed, so the port's own error is legitimate: where the true
                # gradient is smaller than it (bf16 autocast against an fp16 original) and the
                # port's sign differs, the direction Adam follows is noise at the port's precision.
                below = below_port_error(golden, port)
                noisy = below if noisy is None else (noisy if below is None else noisy | below)
            if noisy is not None:
                noisy_masks[name] = noisy if name not in noisy_masks else noisy_masks[name] | noisy
        return True

    def _kinks(self, check: str, ref: dict[str, Any], port: dict[str, Any] | None, golden: dict[str, Any] | None,
               result: TensorComparison) -> TensorComparison:
        """Note a kink activation the port took the other way within its rounding; a gradient of
        that step or a later one in the WARN band is then not judged (`_kinks.py` says why)."""
        at = (check, ref.get("rank"))
        if (ref["kind"] == "forward" and ref.get("module_class") in KINKED and golden is not None
                and port is not None and result.verdict is Verdict.PASS and result.allowed is not None
                and at not in self.kinked):
            scale = float(to_tensor(golden).abs().max()) if golden["shape"] else 0.0
            flips = flipped_kinks(ref, port, golden, result.allowed * scale)
            if flips:
                self.kinked[at] = (ref["step"], ref.get("module_path") or "?", flips)
        kink = self.kinked.get(at)
        if ref["kind"] == "grad" and kink is not None and kink[0] <= ref["step"] and result.verdict is Verdict.WARN:
            step, where, flips = kink
            return dataclasses.replace(result, verdict=Verdict.PASS, judged=False, reason=(
                f"not judged: the port took {flips} input(s) of the {self.module_classes.get(where, 'activation')} at "
                f"{where} the other way than the golden at step {step}, within its rounding (a kink: the gradient "
                f"moves by a sample's share, not by rounding); {result.reason}"))
        return result

    def drop_role(self, role: str) -> None:
        """A run ended: compare what no longer waits for it.

        Only for that run: a key the still-running golden has not sent yet keeps waiting, or the
        port finishing first would judge the last records (the final parameters) without the
        golden, by the stricter reference-only floor.
        """
        self.live.discard(role)
        for key in list(self.pending):
            self._try(key)

    def finish(self, complete: dict[str, bool]) -> list[TensorComparison]:
        """Everything still pending, compared with what there is; ``complete``: role -> the run
        (every rank of it) finished."""
        for key in list(self.pending):
            self._try(key, final=True, complete=complete)
            self.pending.pop(key, None)
        extra = [
            TensorComparison(key, "extra", -1, None, None, (), None, "-", None, "-", None, float("nan"), float("nan"),
                             float("nan"), None, None, None, 0, Verdict.FAIL, "produced by the port only",
                             check="logic" if key.startswith(LOGIC_PREFIX) else "precision")
            for key in self.extra_in_port
        ]
        results = dict(self.results)
        logic_ran = any(k.startswith(LOGIC_PREFIX) for k in results)
        for key, c in list(results.items()):
            if key.startswith(LOGIC_PREFIX):
                continue
            if not logic_ran and self.logic is not True:
                results[key] = dataclasses.replace(c, check="")  # the only comparison: no AMP to split off
                continue
            twin = results.get(LOGIC_PREFIX + key)
            if c.verdict is not Verdict.PASS and twin is not None and twin.verdict is Verdict.PASS:
                # Decidable now: with autocast off the port computes what the original does.
                results[key] = dataclasses.replace(c, reason=f"{c.reason}; with autocast off in both the port "
                                                   "matches the original (logic PASS): the precision policy differs here")
        ordered = sorted(results.values(), key=lambda c: (self.order.get(base_key(c.key), (1 << 30, 0)),
                                                          0 if c.key.startswith(LOGIC_PREFIX) else 1))
        if not logic_ran and self.logic is not True:
            extra = [dataclasses.replace(c, check="") for c in extra]
        return ordered + extra


def _overlaid(request: ValidateRequest) -> frozenset[str]:
    """The port's files validate migrated itself (new since the revision): migrate's output by
    construction, never hand edits; the copy on disk is the unmigrated one."""
    if request.port_overlay is None:
        return frozenset()
    return frozenset(str(p.relative_to(request.port_overlay)) for p in request.port_overlay.rglob("*.py"))


def _labelled(message: str, run: _Run, request: ValidateRequest) -> str:
    """``message`` with the run's tree named as the user knows it: the original of an in-place
    migrate lives in a temporary folder ("proj at HEAD" instead of /tmp/cuda2neuron-validate-...)."""
    label = request.port_label if run.role in ("port", "logic-port") else request.original_label
    return message.replace(str(run.tree), label) if label else message


# What code that expects a launcher says without one: a missing variable read from os.environ, or
# torch.distributed's env:// rendezvous ("environment variable RANK expected, but not set").
_UNLAUNCHED_RE = re.compile(r"KeyError: '(?:LOCAL_)?(?:RANK|WORLD_SIZE)'|KeyError: 'MASTER_(?:ADDR|PORT)'"
                            r"|environment variable (?:RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT) expected")


def _launch_hint(failure: RunFailure, run: _Run) -> RunFailure:
    """A crash of a run started without a launcher, on a launcher's variable: the fix is --nproc
    (``--nproc 1`` sets them as torchrun would for one rank)."""
    if run.rank is not None or not _UNLAUNCHED_RE.search(f"{failure.message}\n{failure.traceback}"):
        return failure
    hint = (" (the code expects torchrun's RANK / WORLD_SIZE / MASTER_ADDR: rerun with --nproc N, "
            "or --nproc 1 for one rank, to start it as torchrun would)")
    return dataclasses.replace(failure, message=failure.message + hint)


def _prepare_emulator(request: ValidateRequest, progress: Callable[[str], None]) -> RunFailure | None:
    """Build the emulated device before the clock starts: a cold build (tens of seconds, under a
    file lock shared with other processes) must not eat the runs' timeout."""
    from cuda2neuron.backend import real_torch_neuronx

    if request.port_device != "neuron" or real_torch_neuronx():
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
    import torch

    # One thread for the comparisons, as each run has: the runs keep every core busy, and torch's
    # thread pool spinning beside them cost 5-10x the CPU of the comparison itself (a 1M-element
    # compare: 150 ms of CPU on 2 threads of a loaded 2-core machine, 15 ms on one).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # Orphans of the runs come to validate while it runs, not to init: what left its session and
    # dropped its token after its run's worker exited is still found, and killed at the end.
    adopting = become_subreaper()
    before = children() if adopting else set()
    made: list[Path] = []
    try:
        return _run_validation(request, on_progress, made, before if adopting else None)
    finally:
        torch.set_num_threads(threads)
        if adopting:
            kill_adopted(before)
            stop_subreaper()
        for folder in made:  # also when interrupted (Ctrl-C, SIGTERM, an error): no temp folder left
            shutil.rmtree(folder, ignore_errors=True)


def _run_validation(request: ValidateRequest, on_progress: Callable[[str], None] | None,
                    made: list[Path], adopted_before: set[int] | None) -> ValidationResult:
    progress = on_progress or (lambda _what: None)
    request = dataclasses.replace(request, original=request.original.resolve(), port=request.port.resolve())
    setup_failure = _prepare_emulator(request, progress)
    if setup_failure is not None:
        return ValidationResult(verdict=Verdict.ERROR, mode=request.mode, target=request.target,
                                original=request.original_label or str(request.original),
                                port=request.port_label or str(request.port), golden_used=False,
                                failures=(setup_failure,))
    q: queue.Queue[tuple[_Run, Any]] = queue.Queue()
    roles = [r for r in ROLES if r != "golden" or request.golden]
    trees = {"reference": request.original, "golden": request.original, "port": request.port,
             "logic-reference": request.original, "logic-port": request.port}
    workdir = Path(tempfile.mkdtemp(prefix="cuda2neuron-validate-runs-"))
    made.append(workdir)
    # role -> its processes: one, or one per rank.
    runs: dict[str, list[_Run]] = {}
    threads: list[threading.Thread] = []
    ref_on_cuda = [False]
    comparator = _Comparator(request, ref_on_cuda)
    classes: dict[str, dict[str, Any]] = {}
    port_classes: list[tuple[str, int, int, tuple[tuple[int, int], ...]]] = []
    notes: list[str] = []
    from cuda2neuron.backend import real_torch_neuronx

    if request.port_device == "neuron" and not real_torch_neuronx():
        from cuda2neuron.backend import torch_support_note

        notes += filter(None, [torch_support_note()])  # torch 2.10-2.12: no public TorchNeuron
    t0 = time.perf_counter()
    timed_out: list[_Run] = []
    skipped: list[tuple[int, float | None]] = []  # (step, loss scale) the original's GradScaler skipped
    aligned: dict[str, int] = {}  # role -> gradient elements that followed the original's sign
    distributed = request.nproc > 1 or request.launched or _launched_distributed()
    ranks: list[int | None] = list(range(request.nproc)) if distributed else [None]
    ports = _free_ports(len(roles)) if distributed else [None] * len(roles)
    # What the reference sent the other runs (initial weights, step outcomes), per rank, kept
    # until it is known whether the logic pair runs: started late, it is sent the same.
    forwarded: dict[int | None, list[dict[str, Any]]] | None = {rank: [] for rank in ranks} if request.logic else None
    open_streams: dict[int, _Run] = {}
    still_open: dict[str, int] = {}
    amp_seen: list[str] = []
    not_exercised: list[str] = []  # modules holding weights that no forward of the original ran
    stop_watch = threading.Event()
    reaper = Reaper(new_token())

    def sweep_orphans() -> None:
        """Kill what a run left behind that left its session and dropped its token: once its
        worker has exited, the kernel hands it to validate (a subreaper while it runs). Trap:
        it may hold the run's stdout / stderr, and reading them to the end waited 5 s per
        stream, twice, for a process that was only killed when validate returned (issue 44's
        case took 27 s). The Reaper is validate's child without a token: never one of them.
        Main thread only, never the watcher's: a run this thread starts (Popen) carries
        validate's environment, no token, between its fork and its exec."""
        if adopted_before is not None:
            kill_adopted(adopted_before | reaper.pids())

    serial = itertools.count()
    zygote: Zygote | None = None
    shared = False

    def start(role: str, master_port: int | None) -> None:
        runs[role] = [_spawn(role, trees[role], request, workdir, rank, master_port, reaper.token(next(serial)),
                             zygote) for rank in ranks]
        if role not in roles:
            roles.append(role)
        for run in runs[role]:
            open_streams[id(run)] = run
            for target in (_reader, _writer):
                th = threading.Thread(target=target, args=(run, q) if target is _reader else (run,), daemon=True)
                th.start()
                threads.append(th)
        still_open[role] = len(runs[role])

    def decide_logic(amp: str | None) -> None:
        """The original runs under reduced-precision autocast (``amp``): start the logic pair, sent
        what the reference sent so far; else (None) it never runs."""
        nonlocal forwarded
        if comparator.logic is not None:
            return
        if amp is None or forwarded is None:
            comparator.set_logic(False)
            forwarded = None
            return
        amp_seen.append(amp)
        logic_ports = _free_ports(len(LOGIC_ROLES)) if distributed else [None] * len(LOGIC_ROLES)
        progress(f"the original runs under {amp} autocast: also running original and port with autocast off ...")
        for role, master_port in zip(LOGIC_ROLES, logic_ports):
            start(role, master_port)
            for run in runs[role]:
                for frame in forwarded.get(run.rank, ()):
                    run.stdin_q.put(frame)
        forwarded = None
        comparator.set_logic(True)

    def forward(run: _Run, frame: dict[str, Any]) -> None:
        """A reference frame the same rank of every other run waits for."""
        for other in roles:
            if other != "reference":
                for peer in runs[other]:
                    if peer.rank == run.rank:
                        peer.stdin_q.put(frame)
        if forwarded is not None:
            forwarded.setdefault(run.rank, []).append(frame)

    try:
        zygote, shared = _start_zygote(request, workdir, reaper.token("zygote"))
        progress(f"running {', '.join(_RUN_NAMES[r] for r in roles[:-1])} and {_RUN_NAMES[roles[-1]]}"
                 + (f" ({request.nproc} ranks each)" if request.nproc > 1 else "") + " ...")
        for role, master_port in zip(list(roles), ports):
            start(role, master_port)
        watcher = threading.Thread(target=_watch, daemon=True, args=(
            lambda: [run for role_runs in list(runs.values()) for run in role_runs],
            request.max_memory or default_max_memory(), stop_watch))
        watcher.start()
        deadline = t0 + request.timeout
        while open_streams:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                timed_out = [r for r in open_streams.values() if not r.aborted]
                break
            try:
                run, frame = q.get(timeout=remaining)
            except queue.Empty:
                continue
            role = run.role
            if frame is None:
                open_streams.pop(id(run), None)
                run.stdin_q.put(None)
                if role == "reference":
                    # no more step outcomes from this rank: nobody waits for one
                    forward(run, {"type": "reference_done"})
                    decide_logic(None)
                if run.limit is not None:
                    run.proc.wait()
                    run.failure = run.limit  # validate ended it: over its memory or output cap
                elif not run.finished and run.failure is None and not run.aborted:
                    run.proc.wait()
                    kill_tree(run.proc.pid, run.token)  # what holds its stdout / stderr open
                    sweep_orphans()
                    for th in run.copiers:  # the whole of stderr, for the tail
                        th.join(timeout=5)
                    run.failure = _launch_hint(RunFailure(run.name, "crash",
                                                          f"exited with status {run.proc.returncode} without a result",
                                                          _tail(run.stderr_path)), run)
                if run.failure is not None:
                    # The other ranks would wait in their next collective until gloo's timeout;
                    # a failed logic original leaves its port nothing to be compared with.
                    siblings = [*runs[role], *(runs.get("logic-port", ()) if role == "logic-reference" else ())]
                    for sibling in siblings:
                        if sibling is not run and not sibling.finished and sibling.failure is None:
                            sibling.aborted = True
                            _kill(sibling)
                still_open[role] -= 1
                if still_open[role] == 0:
                    comparator.drop_role(role)
                if role == "reference" and run.failure is not None:
                    break  # the original itself fails: nothing to compare against
                continue
            kind = frame["type"]
            if kind == "tensor":
                if role == "reference" and comparator.logic is None and frame.get("amp") in _REDUCED:
                    decide_logic(frame["amp"])
                _record(run, frame, comparator)
            elif kind in ("init_state", "step") and role == "reference":
                for grad in frame.get("grads", ()):  # the reference's gradients travel with its step
                    if comparator.logic is None and grad.get("amp") in _REDUCED:
                        decide_logic(grad["amp"])
                    _record(run, dict(grad), comparator)
                if kind == "init_state":
                    comparator.add_initial(run.rank, frame)
                if kind == "step":
                    # One optimizer step without reduced-precision autocast: fp32 code (autocast
                    # first seen after that, in an evaluation, is not split off).
                    decide_logic(None)
                # The initial weights, and each optimizer step's outcome (skipped by the
                # GradScaler or not): the same rank of the other runs waits for them (_recorder.py).
                forward(run, frame)
                if kind == "step" and frame["skipped"] and run.rank in (None, 0):
                    skipped.append((frame["step"], frame.get("scale")))
            elif kind == "class":
                if role == "reference":
                    classes.setdefault(frame["class"], frame)
                elif role == "port":
                    port_classes.append((frame["file"], frame["start"], frame["end"],
                                         tuple(tuple(r) for r in frame.get("init", ()))))
            elif kind == "unexercised":
                if run.rank in (None, 0):
                    not_exercised[:] = frame["modules"]
            elif kind == "aligned":
                aligned[role] = aligned.get(role, 0) + int(frame["elements"])
            elif kind == "ties":
                run.ties[frame["root"]] = frame["groups"]
            elif kind == "hello":
                run.device = frame["device"]
                comparator.devices.setdefault(role, frame["device"])
                if role == "reference" and frame["device"].startswith("cuda"):
                    ref_on_cuda[0] = True
                    comparator.ref_tf32 = bool(frame.get("tf32"))
            elif kind == "audit":
                run.audit = frame["report"]
            elif kind == "done":
                run.finished, run.seconds = True, frame["seconds"]
            elif kind == "error":
                run.failure = _launch_hint(RunFailure(
                    run.name, frame["kind"], _labelled(frame["message"], run, request),
                    frame["traceback"] or _tail(run.stderr_path),
                    "" if frame.get("harness") else frame.get("user_frame") or "",
                    crash_path=tuple(tuple(x) for x in frame.get("crash_path") or ())), run)
            elif kind == "broken":
                run.failure = RunFailure(run.name, "crash", f"record stream broken: {frame['message']}",
                                         _tail(run.stderr_path))
    finally:
        stop_watch.set()
        for role_runs in runs.values():
            for run in role_runs:
                run.stdin_q.put(None)
                _kill(run)
        sweep_orphans()
        for role_runs in runs.values():
            for run in role_runs:
                for th in run.copiers:
                    th.join(timeout=5)
                if run.limit is not None:
                    run.failure = run.limit
        if zygote is not None and not shared:
            zygote.close()
        reaper.close()
    failures: list[RunFailure] = []
    logic_failures: list[RunFailure] = []
    for run in timed_out:
        failure = RunFailure(run.name, "timeout", f"no result within {request.timeout:g} s (all runs together)",
                             _tail(run.stderr_path))
        (logic_failures if run.role in LOGIC_ROLES else failures).append(failure)
    golden_used = request.golden
    for role in roles:
        for run in runs[role]:
            fail = run.failure
            if fail is None or run in timed_out:
                continue
            if role == "golden":
                if golden_used:
                    notes.append(f"float64 golden run failed ({fail.message}); the port was compared with the "
                                 "reference using per-dtype thresholds")
                golden_used = False
            elif role in LOGIC_ROLES:
                logic_failures.append(fail)
            else:
                failures.append(fail)
    if request.golden and any(run.role == "golden" for run in timed_out):
        failures = [f for f in failures if not f.role.startswith("golden")]
        golden_used = False
        notes.append("float64 golden run timed out; the port was compared with the reference")
    ref_ties = runs["reference"][0].ties
    port_ties = runs["port"][0].ties
    for root, groups in ref_ties.items():
        port_groups = port_ties.get(root)
        if port_groups is not None and port_groups != groups:
            untied = [", ".join(g) for g in groups if g not in port_groups]
            notes.append(
                f"weights shared in the original are separate parameters in the port ({'; '.join(untied)}): moving a "
                "module to a PrivateUse1 device such as neuron re-creates its parameters module by module, which "
                "unties shared weights — tie them again after .to(...)")
    if comparator.ref_tf32 and not golden_used:
        notes.append("the reference ran on a GPU that computes float32 convolutions/RNNs (cuDNN's default) or "
                     "matmuls in TF32: without the float64 golden, float32 tensors were judged at TF32's "
                     "precision (floor_tf32); keep the golden on for the tighter verdict")
    if aligned:
        notes.append(_aligned_note(aligned))
    complete = {role: all(r.finished and r.failure is None for r in runs.get(role, ())) and role in runs
                for role in ("reference", "port", *LOGIC_ROLES)}
    ref_ok, port_ok = complete["reference"], complete["port"]
    failures, crashes = _port_defects(failures, ref_ok)
    logic_failures, logic_crashes = _port_defects(logic_failures, complete["logic-reference"], LOGIC_PREFIX)
    failures += [f for f in logic_failures if f.kind == "defect"]
    comparisons = tuple(comparator.finish(complete)) + _shared_devices(runs["port"]) + crashes + logic_crashes
    taken_steps = _compared_steps(comparisons, "precision")
    if skipped:
        notes.insert(0, _skipped_note(skipped, len(taken_steps), request.steps))
    if amp_seen:
        lost = [f for f in logic_failures if f.kind != "defect"]
        if lost:
            notes.append(f"the logic run ({_RUN_NAMES[lost[0].role.split(' rank ')[0]]}) did not finish "
                         f"({lost[0].message}); the precision check alone judged the rest")
        else:
            covered = len(_compared_steps(comparisons, "logic"))
            taken = len(_compared_steps(comparisons, "precision"))
            over = f"every step taken ({taken})" if covered >= taken else f"the first {covered} steps taken of {taken}"
            notes.append(f"the original runs under {amp_seen[0]} autocast: the logic check compared original and port "
                         f"with autocast off in both (float32, tight bounds) over {over}, the precision check the "
                         "runs as written")
    if any(c.check == "logic" for c in comparisons):
        # The port as written crashed or shared a device: a FAIL of the precision check.
        comparisons = tuple(c if c.check else dataclasses.replace(c, check="precision") for c in comparisons)
    fallback = request.entry.split(":")[0].replace(".", "/") + ".py" if request.entry else request.script
    divergence = None
    first_fail = _first_failure(comparisons)
    if first_fail is not None and ref_ok:
        crash_path: tuple[tuple[str, str, int], ...] = ()
        if first_fail.kind == "crash":
            crashed = next((f for f in failures if f.kind == "defect" and f.location and first_fail.reason.endswith(
                f" at {f.location}") and (f.role.startswith("logic-") == (first_fail.check == "logic"))), None)
            crash_path = crashed.crash_path if crashed is not None else ()
        divergence = localise(first_fail, request.original, classes, comparator.module_classes, fallback, crash_path)
        first_files = [f for f in (divergence.class_file, fallback) if f]
        if first_fail.kind == "crash":  # the port file that raised first, then the rest of its path
            first_files[:0] = [first_fail.reason.rsplit(" at ", 1)[-1].split(":")[0], *(p[0] for p in crash_path)]
        divergence = dataclasses.replace(divergence, hand_edits=hand_edits(request.original, request.port, first_files,
                                                                            skip=_overlaid(request)))
    port_audit = _merged_audit([r.audit for r in runs["port"]])
    audit = audit_from_report(port_audit, str(request.port), port_classes, request.tolerances,
                              "" if port_audit is not None else
                              f"op accounting unavailable on {runs['port'][0].device}")
    if audit.available and audit.verdict is not Verdict.PASS and divergence is None and port_ok:
        # Residency alone failed: name the edits made by hand after migrate, the files where
        # work ran on the CPU first (a wrong device string moves everything there).
        cpu_files = [_relative(loc, request.port) for d in audit.cpu_op_details for loc in d.locations]
        first_files = [f for f in (*cpu_files, fallback) if f]
        audit = dataclasses.replace(audit, hand_edits=hand_edits(request.original, request.port, first_files,
                                                                 skip=_overlaid(request)))
    verdicts = [c.verdict for c in comparisons] + ([audit.verdict] if audit.available else [])
    share = judged_share(comparisons)
    if share is not None and share < request.tolerances.min_judged_share:
        verdicts.append(Verdict.WARN)
        notes.append(f"only {share:.0%} of the tensors were judged (the rest PASSed bounds with no power: the "
                     "original's own error against the float64 golden allows nearly anything there) — "
                     f"not a proof; at least {request.tolerances.min_judged_share:.0%} is needed for a PASS")
    if comparisons and not taken_steps and ref_ok:
        # Nothing shows a wrong gradient, optimizer or update then: a detached loss term PASSed.
        verdicts.append(Verdict.WARN)
        notes.insert(0, _no_step_note(skipped))
    if any(f.kind != "defect" for f in failures):
        verdict = Verdict.ERROR
    elif not comparisons:
        verdict = Verdict.ERROR
        failures.append(RunFailure("harness", "no-records", "the runs produced no tensors to compare"))
    else:
        verdict = worst(verdicts)
    if not_exercised:
        notes.append(f"{len(not_exercised)} module(s) with weights were not exercised: no forward of the original ran "
                     f"them within the steps compared, so their parameters and buffers were neither compared nor judged "
                     f"({'; '.join(not_exercised[:8])}{'; ...' if len(not_exercised) > 8 else ''}) — an EMA used only "
                     "for evaluation is judged when the run reaches that evaluation (a script's own shorter --steps)")
    infos = tuple(RunInfo(run.name, str(run.tree), run.device, run.seconds, run.records)
                  for role in roles for run in runs[role])
    shutil.rmtree(workdir, ignore_errors=True)
    return ValidationResult(
        verdict=verdict, mode=request.mode, target=request.target,
        original=request.original_label or str(request.original), port=request.port_label or str(request.port),
        golden_used=golden_used, comparisons=comparisons, divergence=divergence, audit=audit,
        failures=tuple(failures), runs=infos, notes=tuple(notes), fail_on=request.fail_on,
        tolerances=request.tolerances, not_exercised=tuple(not_exercised),
    )


def _shared_devices(ranks: list[_Run]) -> tuple[TensorComparison, ...]:
    """A FAIL for each rank whose model ran on a device an earlier rank already used.

    On the emulator every rank can address neuron:0, so ranks that all pick device 0 (a
    hard-coded `device_ids=[0]`, `set_device(0)`, `"neuron:0"`) compute the right numbers — on a
    Trainium node they would fight over one NeuronCore (or the runtime refuses the second
    process). One device per rank, its local rank, is what torchrun-launched code must use.
    """
    owner: dict[int, int] = {}
    found: list[TensorComparison] = []
    for run in ranks:
        if run.rank is None:
            return ()
        for index, key in sorted(run.devices.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            index = 0 if index is None else index
            first = owner.setdefault(index, run.rank)
            if first != run.rank:
                found.append(TensorComparison(
                    f"rank{run.rank}/device", "device", 0, None, None, (), None, "-", None, "-", f"neuron:{index}",
                    float("nan"), float("nan"), float("nan"), None, None, None, 0, Verdict.FAIL,
                    f"rank {run.rank} ran its model on neuron:{index}, the device of rank {first} (first at {key}): "
                    f"each rank needs its own NeuronCore — use its LOCAL_RANK (torch.neuron.set_device(local_rank), "
                    f"device_ids=[local_rank])"))
    return tuple(found)


# The device's refusal of an op TorchNeuron does not support (backend/op_support.py, an N row): an
# ERROR naming the op and the line, as an emulator gap is, not a FAIL of an otherwise right port.
UNSUPPORTED_OP = "is not supported on Trainium (N in the op-support table"


def _port_defects(failures: list[RunFailure], ref_ok: bool, prefix: str = "",
                  ) -> tuple[list[RunFailure], tuple[TensorComparison, ...]]:
    """A port run that raised in its own code while the original ran to its end is a defect of the
    port — `DDP(device_ids=[0])` on every rank, a tensor left on the host meeting a device tensor
    — so a FAIL naming the port line, not an ERROR. It stays an ERROR when the original failed too,
    when the exception never went through the port's code or came from validate itself
    (`location` empty), or when it is a gap of the emulated device (an aten op it lacks)."""
    if not ref_ok:
        return failures, ()
    kept: list[RunFailure] = []
    found: list[TensorComparison] = []
    for f in failures:
        role, _, rank = f.role.partition(" rank ")
        if (role in ("port", "logic-port") and f.kind == "crash" and f.location
                and "Could not run 'aten::" not in f.message and UNSUPPORTED_OP not in f.message):
            f = dataclasses.replace(f, kind="defect")
            message = f.message.rsplit(" at /", 1)[0]
            found.append(TensorComparison(
                prefix + (f"rank{rank}/crash" if rank else "crash"), "crash", -1, None, None, (), None, "-", None, "-",
                None, float("nan"), float("nan"), float("nan"), None, None, None, 0, Verdict.FAIL,
                f"the {_RUN_NAMES.get(role, role)}{' rank ' + rank if rank else ''} raised {message} where the "
                f"original ran through, at {f.location}", check="logic" if prefix else ""))
        kept.append(f)
    return kept, tuple(found)


def _launched_distributed() -> bool:
    """validate itself was started with a launcher's variables (``WORLD_SIZE=2 cuda2neuron validate``
    or from a torchrun shell): the script expects them, and each run still needs its own
    rendezvous, or the three runs would meet on one MASTER_PORT (EADDRINUSE)."""
    return "WORLD_SIZE" in os.environ or "RANK" in os.environ


def _merged_audit(reports: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One residency report for all ranks of the port: counts add up, host sites are joined."""
    present = [r for r in reports if r is not None]
    if len(present) <= 1:
        return present[0] if present else None
    merged: dict[str, Any] = {k: sum(r.get(k, 0) for r in present) for k in
                              ("device_ops", "device_elements", "cpu_ops", "cpu_elements", "float64_ops", "complex_ops",
                               "optimizer_host_ops")}
    for key in ("cpu_op_details", "float64_op_details", "complex_op_details"):
        details: dict[str, dict[str, Any]] = {}
        for r in present:
            for d in r.get(key, ()):
                have = details.setdefault(d["op"], {"op": d["op"], "count": 0, "elements": 0, "locations": []})
                have["count"] += d["count"]
                have["elements"] += d["elements"]
                have["locations"] = [*have["locations"], *(loc for loc in d["locations"] if loc not in have["locations"])]
        merged[key] = list(details.values())
    merged["api_host_sites"] = sorted({s for r in present for s in r["api_host_sites"]})
    fallbacks: dict[str, dict[str, Any]] = {}
    for r in present:
        for d in r.get("fallback_ops", ()):
            have = fallbacks.setdefault(d["op"], {"op": d["op"], "count": 0, "locations": []})
            have["count"] += d["count"]
            have["locations"] = [*have["locations"], *(loc for loc in d["locations"] if loc not in have["locations"])]
    merged["fallback_ops"] = list(fallbacks.values())
    return merged


def judged_share(comparisons: tuple[TensorComparison, ...]) -> float | None:
    """Share of the recorded tensors that some check judged with power (None: none recorded)."""
    seen: set[str] = set()
    judged: set[str] = set()
    for c in comparisons:
        if c.kind in ("crash", "device", "extra"):
            continue
        key = base_key(c.key)
        seen.add(key)
        if c.judged:
            judged.add(key)
    return len(judged) / len(seen) if seen else None


def _first_failure(comparisons: tuple[TensorComparison, ...]) -> TensorComparison | None:
    """The first FAIL — of the logic check when it has one (autocast off, tight bounds: it names a
    changed computation, free of fp16 noise) — except that a gradient the port did not produce at
    that step names the culprit better (a detached module changes every gradient upstream of it,
    the first of which is recorded earlier than the module's own missing ones)."""
    fails = [c for c in comparisons if c.verdict is Verdict.FAIL]
    fails = [c for c in fails if c.check == "logic"] or fails
    first = fails[0] if fails else None
    if first is None or first.kind != "grad":
        return first
    missing = next((c for c in fails if c.kind == "grad" and c.step == first.step
                    and c.reason == "not produced by the port"), None)
    return missing or first


def _record(run: _Run, frame: dict[str, Any], comparator: _Comparator) -> None:
    """One tensor record of ``run`` into the comparison (its key prefixed by its rank)."""
    if run.rank is not None:
        frame["key"] = f"rank{run.rank}/{frame['key']}"
        frame["rank"] = run.rank
    if frame["kind"] in ("forward", "param") and frame["device"] != "cpu":
        run.devices.setdefault(frame.get("device_index"), frame["key"])
    comparator.add(run.role, frame)
    run.records += 1


def _aligned_note(aligned: dict[str, int]) -> str:
    counts = " and ".join(f"{n} in the {_RUN_NAMES[role]}" for role, n in sorted(aligned.items()))
    return (f"gradient elements that are rounding noise (the original and this run disagree on their sign, or on "
            f"their size by more than 1/8, at under 1/16 of the tensor's largest gradient) followed the original's "
            f"value before each optimizer step: {counts}; a normalising optimizer (Adam) would otherwise move those "
            "weights by up to ~2*lr apart. The gradients were compared before that")


def _compared_steps(comparisons: Any, check: str) -> list[int]:
    """The optimizer steps whose gradients ``check`` compared ("precision" counts the only check
    too), in order: the steps taken, the ones the original's GradScaler skipped recording none."""
    checks = ("logic",) if check == "logic" else ("", "precision")
    return sorted({c.step for c in comparisons if c.kind == "grad" and c.check in checks})


def _span(steps: list[int]) -> str:
    """``[0, 1, 2]`` -> "0–2", ``[0, 2]`` -> "0, 2"."""
    if len(steps) > 2 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}–{steps[-1]}"
    return ", ".join(str(s) for s in steps)


def _scales(skipped: list[tuple[int, float | None]]) -> str:
    scales = sorted({sc for _, sc in skipped if sc is not None}, reverse=True)
    if len(scales) > 3:  # each skip halves the scale: the first and the last say it
        return f"{scales[0]:g} down to {scales[-1]:g}"
    return ", ".join(f"{sc:g}" for sc in scales)


def _skipped_note(skipped: list[tuple[int, float | None]], taken: int, requested: int) -> str:
    scales = _scales(skipped)
    at = f" at loss scale {scales}" if scales else ""
    if taken >= requested:
        ran = f"; validate ran on to compare {taken} steps taken, as --steps asks"
    elif len(skipped) >= SKIPPED_STEPS_CAP:
        ran = (f"; validate stopped after {len(skipped)} skipped steps ({SKIPPED_STEPS_CAP} past --steps, the cap) "
               f"with {taken} of the {requested} steps taken that --steps asks for")
    else:
        ran = f"; the run ended with {taken} of the {requested} steps taken that --steps asks for"
    return (f"the original's GradScaler skipped optimizer step(s) {_span([s for s, _ in skipped])} (inf/NaN "
            f"gradients{at}, the usual start of fp16 loss scaling); the golden and the port skipped the same steps so "
            f"every run stays aligned, and those steps' gradients were not compared{ran}")


def _no_step_note(skipped: list[tuple[int, float | None]]) -> str:
    """Why a run that compared tensors compared no optimizer step."""
    if skipped:
        scales = _scales(skipped)
        why = (f"the reference skipped steps {_span([s for s, _ in skipped])} (inf/NaN"
               + (f" at scale {scales})" if scales else ")"))
    else:
        why = "no gradient reached an optimizer step"
    return (f"no optimizer step was compared: {why} — the gradients, the optimizer and the update were not "
            "judged, so this is not a PASS; give the GradScaler a lower init_scale or run more --steps")


def _relative(location: str, tree: Path) -> str | None:
    """``/abs/port/model.py:54`` -> ``model.py`` (None outside the tree)."""
    path = location.rsplit(":", 1)[0]
    try:
        return os.path.relpath(os.path.realpath(path), os.path.realpath(tree)) if os.path.isabs(path) else path
    except ValueError:
        return None
