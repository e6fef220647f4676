"""What to validate: a frozen `ValidateRequest`, and the rules that build one from the options a
caller gives and the project's `[tool.cuda2neuron.validate]` table (explicit options win).

Torch-free: a bad request is refused before anything is imported or run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda2neuron.validate._model import Tolerances
from cuda2neuron.validate._trees import Trees

__all__ = ["RequestError", "ValidateRequest", "build_request"]

# Defaults when neither an option nor the config table gives a value (docs/validate.md).
DEFAULT_STEPS = 3
DEFAULT_TIMEOUT = 600.0
DEFAULT_SEED = 0
#: Optimizer steps the logic pair records (at most --steps): a forward, backward and update, and
#: a second step for what only shows from there (accumulated gradients, a schedule's first move).
DEFAULT_LOGIC_STEPS = 2
#: The verdicts `--fail-on` accepts: the least severe verdict that makes validate exit 1.
FAIL_ON = ("fail", "warn")


@dataclass(frozen=True)
class ValidateRequest:
    original: Path
    port: Path
    mode: str  # entry | script
    entry: str | None = None
    script: str | None = None
    args: tuple[str, ...] = ()
    steps: int = DEFAULT_STEPS
    timeout: float = DEFAULT_TIMEOUT
    seed: int = DEFAULT_SEED
    golden: bool = True
    # The logic pair: when the original runs under reduced-precision autocast, original and port
    # are also run with autocast off in both and compared at float32 precision.
    logic: bool = True
    logic_steps: int = DEFAULT_LOGIC_STEPS
    port_device: str = "neuron"  # "cpu" only for tests that run without the emulator
    nproc: int = 1  # ranks per run (torchrun's --nproc_per_node); 1: one process per run
    # The ranks are started as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR, ... set), one
    # included: nproc was asked for (--nproc, a torchrun --script, nproc in the config). Trap:
    # `--nproc 1` on a script that reads RANK must not run it as a plain process.
    launched: bool = False
    tolerances: Tolerances = field(default_factory=Tolerances)
    original_label: str = ""
    port_label: str = ""
    fail_on: str = "fail"  # "warn": a WARN verdict exits 1 as well (for CI)
    # Files new since the revision, migrated in memory for the port run (validate/_trees.py).
    port_overlay: Path | None = None
    # Caps per run (all processes of one run together); None: the defaults (_runner.py).
    max_memory: int | None = None  # bytes of resident memory
    max_output: int | None = None  # bytes of stdout and stderr

    @property
    def target(self) -> str:
        return self.entry or " ".join([self.script or "", *self.args]).strip()


class RequestError(ValueError):
    """A request that cannot run. ``option`` names the option at fault when one is (``"--tolerance"``)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


def build_request(
    trees: Trees,
    table: Mapping[str, Any],
    *,
    entry: str | None = None,
    script: str | None = None,
    args: tuple[str, ...] = (),
    steps: int | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    tolerances: Mapping[str, float] | None = None,
    golden: bool = True,
    port_device: str = "neuron",
    nproc: int | None = None,
    fail_on: str | None = None,
    logic: bool | None = None,
    logic_steps: int | None = None,
) -> ValidateRequest:
    """The request for ``trees``; ``None`` options fall back to ``table``, then to the defaults.

    The mode comes from the table only when neither ``entry`` nor ``script`` is given, and the
    table's ``args`` only when no ``args`` are given.
    """
    if entry and script:
        raise RequestError("--entry and --script are exclusive")
    if not entry and not script:
        entry, script = table.get("entry"), table.get("script")
        if not args:
            args = tuple(table.get("args", ()))
        if entry and script:
            raise RequestError("[tool.cuda2neuron.validate] sets both entry and script; pick one")
    if not entry and not script:
        raise RequestError("give --entry module:callable or --script train.py "
                           "(or set entry/script in [tool.cuda2neuron.validate])")
    launch_nproc = None
    if script and _is_launcher(script):
        script, args, launch_nproc = _torchrun_command(script, tuple(args))
    launched = nproc is not None or launch_nproc is not None or "nproc" in table
    nproc = nproc if nproc is not None else launch_nproc if launch_nproc is not None else table.get("nproc", 1)
    if type(nproc) is not int or nproc < 1:
        raise RequestError(f"nproc must be a whole number of ranks, 1 or more; got {nproc!r}", option="--nproc")
    if args and not script:
        raise RequestError("arguments after -- are for --script only")
    try:
        tol = Tolerances().with_overrides(**{**table.get("tolerances", {}), **(tolerances or {})})
    except ValueError as exc:
        raise RequestError(str(exc), option="--tolerance") from None
    logic = logic if logic is not None else table.get("logic", True)
    if not isinstance(logic, bool):
        raise RequestError(f"logic must be true or false, got {logic!r}", option="--no-logic")
    logic_steps = logic_steps if logic_steps is not None else table.get("logic_steps", DEFAULT_LOGIC_STEPS)
    if type(logic_steps) is not int or logic_steps < 1:
        raise RequestError(f"logic_steps must be a whole number of steps, 1 or more; got {logic_steps!r}",
                           option="--logic-steps")
    fail_on = fail_on or str(table.get("fail_on", "fail"))
    if fail_on not in FAIL_ON:
        raise RequestError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}", option="--fail-on")
    return ValidateRequest(
        original=trees.original, port=trees.port, mode="entry" if entry else "script", entry=entry, script=script,
        args=tuple(args), steps=steps or int(table.get("steps", DEFAULT_STEPS)),
        timeout=timeout or float(table.get("timeout", DEFAULT_TIMEOUT)),
        seed=seed if seed is not None else int(table.get("seed", DEFAULT_SEED)), golden=golden, logic=logic,
        logic_steps=logic_steps, port_device=port_device, nproc=nproc, launched=launched, tolerances=tol,
        original_label=trees.original_label, port_label=trees.port_label,
        fail_on=fail_on, port_overlay=trees.port_overlay, max_memory=_mib_option(table, "max_memory_mb"),
        max_output=_mib_option(table, "max_output_mb"),
    )


def _mib_option(table: Mapping[str, Any], key: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if type(value) not in (int, float) or not value > 0:
        raise RequestError(f"[tool.cuda2neuron.validate] {key} must be a positive number of MiB, got {value!r}")
    return int(value * (1 << 20))


# torchrun's spellings: the console script, and `python -m torch.distributed.run` given as
# `--script torch.distributed.run`.
_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
# torchrun options that take a value (a separate word unless written NAME=VALUE).
_LAUNCHER_VALUE_OPTIONS = frozenset({
    "--nproc-per-node", "--nproc_per_node", "--nnodes", "--node-rank", "--node_rank", "--master-addr",
    "--master_addr", "--master-port", "--master_port", "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint",
    "--rdzv_endpoint", "--rdzv-id", "--rdzv_id", "--rdzv-conf", "--rdzv_conf", "--max-restarts",
    "--max_restarts", "--monitor-interval", "--monitor_interval", "--start-method", "--start_method",
    "--role", "--log-dir", "--log_dir", "-r", "--redirects", "-t", "--tee", "--local-addr", "--local_addr",
    "--logs-specs", "--logs_specs", "--local-ranks-filter", "--local_ranks_filter",
})


def _is_launcher(script: str) -> bool:
    return script in _LAUNCHERS or script.rsplit("/", 1)[-1] == "torchrun"


def _torchrun_command(launcher: str, args: tuple[str, ...]) -> tuple[str, tuple[str, ...], int | None]:
    """``--script torchrun -- --nproc_per_node=2 train.py --steps 3`` -> ("train.py", ("--steps", "3"), 2).

    validate launches the ranks itself (each run its own rendezvous), so the launcher's own
    options are read for the rank count and otherwise dropped; one node only.
    """
    nproc: int | None = None
    i = 0
    while i < len(args):
        word = args[i]
        if not word.startswith("-"):
            break
        name, eq, value = word.partition("=")
        if name in _LAUNCHER_VALUE_OPTIONS and not eq:
            if i + 1 >= len(args):
                raise RequestError(f"{launcher} {name} needs a value")
            value, i = args[i + 1], i + 1
        if name in ("--nproc-per-node", "--nproc_per_node"):
            if not value.isdigit() or int(value) < 1:
                raise RequestError(f"{launcher} {name}={value}: validate needs a number of ranks (not 'gpu' or "
                                   "'auto': there is no GPU to count)", option="--nproc")
            nproc = int(value)
        elif name == "--nnodes" and value not in ("1", "1:1"):
            raise RequestError(f"{launcher} --nnodes={value}: validate runs one node; give --nproc_per_node")
        elif name == "-m" or name == "--module":
            raise RequestError(f"{launcher} -m: validate runs a script file; give the module's path")
        i += 1
    if i >= len(args):
        raise RequestError(f"--script {launcher}: name the training script after the launcher's options "
                           f"(--script {launcher} -- --nproc_per_node=2 train.py ARGS)")
    return args[i], args[i + 1:], nproc
