"""Frozen result types of `cuda2neuron validate`: the engine returns these, only the CLI prints."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "Verdict",
    "Tolerances",
    "TensorComparison",
    "EditFinding",
    "HandEdit",
    "Divergence",
    "CpuOpFinding",
    "ResidencyAudit",
    "RunFailure",
    "RunInfo",
    "ValidationResult",
]


class Verdict(str, enum.Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    ERROR = "ERROR"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Verdict.PASS: 0, Verdict.WARN: 1, Verdict.FAIL: 2, Verdict.ERROR: 3}


def worst(verdicts) -> Verdict:
    result = Verdict.PASS
    for v in verdicts:
        if v.rank > result.rank:
            result = v
    return result


# Normalised-error floors per dtype: below this, differences are rounding noise of that dtype
# even when the reference happens to agree with the golden to the last bit.
_DEFAULT_FLOORS = (
    ("float64", 1e-12),
    ("float32", 2e-5),
    ("float16", 2e-3),
    ("bfloat16", 1.6e-2),
    # A float32 reference computed in TF32 on a GPU (float16's mantissa), judged without a golden.
    ("tf32", 2e-3),
)


@dataclass(frozen=True)
class Tolerances:
    """How far the port may be from the float64 golden, relative to the reference's own error.

    PASS when port_error <= pass_factor * max(reference_error scaled to the port's dtype,
    floor[dtype]); WARN up to warn_factor; FAIL beyond. Errors are normalised by the largest
    magnitude of the golden tensor so one threshold serves logits, activations and gradients.
    """

    pass_factor: float = 4.0
    warn_factor: float = 32.0
    floors: tuple[tuple[str, float], ...] = _DEFAULT_FLOORS
    # Residency policy (see docs/validate.md): share of the port's elementwise work that ran on CPU.
    residency_warn_share: float = 0.0
    residency_fail_share: float = 0.10
    # Share of the recorded tensors some check must judge with power (see TensorComparison.judged)
    # for the run to PASS; below it the verdict is at least WARN.
    min_judged_share: float = 0.8

    def floor(self, dtype: str) -> float:
        for name, value in self.floors:
            if name == dtype:
                return value
        return 0.0

    def with_overrides(self, **overrides: float) -> "Tolerances":
        floors = dict(self.floors)
        plain: dict[str, float] = {}
        for key, value in overrides.items():
            if key.startswith("floor_"):
                floors[key[len("floor_"):]] = float(value)
            elif key in {"pass_factor", "warn_factor", "residency_warn_share", "residency_fail_share",
                         "min_judged_share"}:
                plain[key] = float(value)
            else:
                raise ValueError(f"unknown tolerance {key!r}")
        return Tolerances(**{**self.__dict__, **plain, "floors": tuple(floors.items())})


@dataclass(frozen=True)
class TensorComparison:
    """One recorded tensor, compared across the runs."""

    key: str
    kind: str  # forward | output | loss | grad | param
    step: int
    module_path: str | None
    module_class: str | None
    shape_ref: tuple[int, ...]
    shape_port: tuple[int, ...] | None
    dtype_ref: str
    dtype_port: str | None
    device_ref: str
    device_port: str | None
    max_abs: float
    max_rel: float
    cosine: float
    ref_error: float | None  # normalised error of the reference vs the golden
    port_error: float | None  # normalised error of the port vs the golden (or vs the reference)
    allowed: float | None
    nonfinite_mismatch: int
    verdict: Verdict
    reason: str
    # Which comparison: "logic" (original and port with autocast off in both), "precision" (the
    # runs as written, under reduced-precision autocast), "" (the only one: no such autocast).
    check: str = ""
    # False for a PASS whose bounds had no power: the original's own error against the golden
    # is so large that a broken port would pass too (counted and shown apart).
    judged: bool = True
    # Direction: cosine of the port and of the reference with the golden (with the reference when
    # there is no golden), and the angle (radians) the port was allowed; None where not judged
    # by direction (final parameters, integer tensors, zero tensors).
    port_cosine: float | None = None
    ref_cosine: float | None = None
    allowed_angle: float | None = None


@dataclass(frozen=True)
class EditFinding:
    """A migrate finding (rule code and location in the ORIGINAL tree) tied to a divergence."""

    code: str
    name: str
    message: str
    path: str
    line: int
    col: int


@dataclass(frozen=True)
class HandEdit:
    """A line of the port that migrate would not have written (path and line in the PORT tree)."""

    path: str
    line: int
    kind: str  # changed | added | removed (the text migrate wrote there is gone)
    text: str


@dataclass(frozen=True)
class Divergence:
    """The first recorded tensor that failed, and where in the user's code to look."""

    key: str
    kind: str
    step: int
    module_path: str | None
    module_class: str | None
    class_file: str | None
    class_lines: tuple[int, int] | None
    findings: tuple[EditFinding, ...]
    findings_scope: str  # which code the findings were collected from
    reason: str
    # Port lines that differ from migrate's output for the original (edits made by hand).
    hand_edits: tuple[HandEdit, ...] = ()


@dataclass(frozen=True)
class CpuOpFinding:
    op: str
    count: int
    elements: int
    locations: tuple[str, ...]


@dataclass(frozen=True)
class ResidencyAudit:
    available: bool
    note: str
    device_ops: int = 0
    cpu_ops: int = 0
    device_elements: int = 0
    cpu_elements: int = 0
    float64_ops: int = 0
    complex_ops: int = 0
    cpu_op_details: tuple[CpuOpFinding, ...] = ()
    verdict: Verdict = Verdict.PASS
    reasons: tuple[str, ...] = ()
    # Host work PyTorch's own API contract requires (packed-sequence lengths): reported, not judged.
    expected_host_work: tuple[str, ...] = ()
    # When the audit is what failed: port lines migrate did not write (a hand edit that moved
    # work to the CPU has no finding to point at; see _hand_edits.py).
    hand_edits: tuple[HandEdit, ...] = ()
    # One-element CPU ops inside optimizer.step(): the step counters torch.optim keeps on the host
    # for parameters on every device. Part of cpu_ops, left out of the op share.
    optimizer_host_ops: int = 0
    # Ops TorchNeuron runs on the host (CPU_FALLBACK in the emulator's op-support table): they ran
    # on the emulated device, and would run on the host on Trainium. Listed, not judged.
    fallback_ops: tuple[CpuOpFinding, ...] = ()
    # The device ops on float64 / complex data, per op with the user lines that ran them: the
    # count alone named no line to fix (issue 40: "52 float64 ops" on a schedule array).
    float64_op_details: tuple[CpuOpFinding, ...] = ()
    complex_op_details: tuple[CpuOpFinding, ...] = ()

    @property
    def op_share_on_device(self) -> float:
        total = self.device_ops + self.cpu_ops - self.optimizer_host_ops
        return self.device_ops / total if total > 0 else 1.0

    @property
    def element_share_on_device(self) -> float:
        total = self.device_elements + self.cpu_elements
        return self.device_elements / total if total else 1.0


@dataclass(frozen=True)
class RunFailure:
    role: str  # reference | golden | port | harness
    # crash | timeout | entry-not-found | no-training-loop | bad-entry | setup, or defect: the
    # port's own code raised while the original ran through (a FAIL of the port, not an ERROR)
    kind: str
    message: str
    traceback: str = ""
    location: str = ""  # the innermost frame of the run's own tree ("train.py:42"), if any
    # Where a crash went through the run's own tree: (file, qualified name, line) of each frame
    # there, outermost first, then ("file", "Class", 0) for the classes of the objects the
    # raising line uses (a scaler built in another module) — where the localisation looks.
    crash_path: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class RunInfo:
    role: str
    tree: str
    device: str
    seconds: float
    records: int


@dataclass(frozen=True)
class ValidationResult:
    verdict: Verdict
    mode: str  # entry | script
    target: str  # "module:callable" or "script.py ARGS"
    original: str
    port: str
    golden_used: bool
    comparisons: tuple[TensorComparison, ...] = ()
    divergence: Divergence | None = None
    audit: ResidencyAudit | None = None
    failures: tuple[RunFailure, ...] = ()
    runs: tuple[RunInfo, ...] = ()
    notes: tuple[str, ...] = field(default=())
    fail_on: str = "fail"  # "warn": WARN exits 1 too (`--fail-on warn`, for CI)
    tolerances: Tolerances = field(default_factory=Tolerances)  # what the verdicts were judged by
    # Modules holding weights that no forward of the original ran ("ema (ViT, 52 parameters, 0
    # buffers)"): never compared, counted beside the verdict.
    not_exercised: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        if self.verdict is Verdict.ERROR:
            return 2
        if self.verdict is Verdict.FAIL or (self.verdict is Verdict.WARN and self.fail_on == "warn"):
            return 1
        return 0

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict if v is not Verdict.ERROR}
        for c in self.comparisons:
            out[c.verdict.value] = out.get(c.verdict.value, 0) + 1
        return out

    @property
    def not_judged(self) -> int:
        """PASSes whose bounds had no power (the original itself too far from the golden)."""
        return sum(1 for c in self.comparisons if not c.judged)

    def checks(self) -> dict[str, Verdict]:
        """The verdict of each check when the original ran under reduced-precision autocast:
        {"logic": ..., "precision": ...} (autocast off in both / the runs as written), else {}."""
        by: dict[str, list[Verdict]] = {}
        for c in self.comparisons:
            if c.check:
                by.setdefault(c.check, []).append(c.verdict)
        if not by:
            return {}
        if self.audit is not None and self.audit.available and "precision" in by:
            by["precision"].append(self.audit.verdict)  # the port as written is where residency is measured
        # A check absent here did not run (its runs failed: a note says why).
        return {check: worst(by[check]) for check in ("logic", "precision") if check in by}
