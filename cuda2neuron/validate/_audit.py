"""Device-residency audit of the port run, from the emulator's op accounting.

Counting starts at the first forward of the model (after the reference's weights are loaded):
building a model and its data on the host is not a porting bug. Policy (docs/validate.md): an op
that ran on the CPU from inside the source of one of the port's nn.Module classes (outside
`__init__`) is model compute left on the host -> WARN; when the CPU share of all elements processed exceeds
`residency_fail_share` -> FAIL. Host-pipeline ops (views, pinning, collation, sampler draws) do
not count towards that share: they run on the host with every accelerator. CPU work elsewhere is
listed but not judged. Ops TorchNeuron runs on the host (CPU_FALLBACK rows of the emulator's
op-support table) are listed as "would run on the host on Trainium", not judged. float64/complex ops -> WARN:
Trainium computes float64 in float32 and has no complex dtypes; the finding names the user lines
that ran them (a count alone left a float64 schedule array to be searched for by hand).

API-mandated host work: on the lines where the port calls the packed-sequence API (collected at
run time, `_host_api.py`), the host bookkeeping ops in `API_HOST_OPS` (sorting lengths, reading
batch sizes) are reported as expected host work — PyTorch requires it on every device — and are
neither a model-code WARN nor part of the CPU share. Real compute on such a line still counts.
"""

from __future__ import annotations

import os
from typing import Any

from cuda2neuron.validate._model import CpuOpFinding, ResidencyAudit, Tolerances, Verdict

__all__ = ["API_HOST_OPS", "audit_from_report"]

# Ops a data pipeline runs on the host whatever the device: indexing a dataset (views), the
# DataLoader's collation and pinning, the sampler's random draws, scalar reads.
_HOST_PIPELINE_OPS = frozenset(
    f"aten::{op}"
    for op in (
        "select", "slice", "view", "as_strided", "set_", "alias", "unsqueeze", "squeeze", "expand",
        "permute", "transpose", "t", "reshape", "_reshape_alias", "detach", "pin_memory",
        "_pin_memory", "is_pinned", "item", "_local_scalar_dense", "random_", "randperm", "stack",
        "empty", "empty_strided", "lift_fresh",
    )
)


# Copies whose source is a host tensor: the transfer to the device itself.
_TRANSFER_OPS = frozenset(f"aten::{op}" for op in ("to", "_to_copy", "copy_", "detach_"))


# What the packed-sequence API does with its host lengths / batch sizes: sort them, copy them to
# the host, read them one by one, index and slice them. Deliberately no arithmetic ops.
API_HOST_OPS = frozenset(
    f"aten::{op}"
    for op in (
        "sort", "argsort", "to", "_to_copy", "copy_", "item", "_local_scalar_dense", "select", "slice",
        "index", "lift_fresh", "detach", "arange",
    )
)


def _split(loc: str) -> tuple[str, int]:
    path, _, line = loc.rpartition(":")
    try:
        return path, int(line)
    except ValueError:
        return loc, 0


ClassRange = tuple[str, int, int, tuple[tuple[int, int], ...]]


def _in_model_code(loc: str, tree: str, class_ranges: list[ClassRange]) -> bool:
    """Inside an nn.Module class of the port, outside its __init__ (parameters are created on
    the host and moved, which is ordinary PyTorch)."""
    path, line = _split(loc)
    full = os.path.realpath(path if os.path.isabs(path) else os.path.join(tree, path))
    for rel, start, end, init_ranges in class_ranges:
        if os.path.realpath(os.path.join(tree, rel)) == full and start <= line <= end:
            if not any(a <= line <= b for a, b in init_ranges):
                return True
    return False


def _findings(rows: Any) -> tuple[CpuOpFinding, ...]:
    return tuple(CpuOpFinding(d["op"], int(d["count"]), int(d["elements"]), tuple(d["locations"])) for d in rows)


def _lines(details: tuple[CpuOpFinding, ...], limit: int = 5) -> str:
    """Where a dtype finding's ops ran: the user lines with their ops ("model.py:12: index, to"),
    or that no user line ran them (torch's or a library's own code)."""
    ops_at: dict[str, set[str]] = {}
    for d in details:
        for loc in d.locations:
            ops_at.setdefault(loc, set()).add(d.op.removeprefix("aten::"))
    if not ops_at:
        return "no line of your code: inside torch or a library"
    shown = [f"{loc}: {', '.join(sorted(ops))}" for loc, ops in sorted(ops_at.items())[:limit]]
    more = f"; {len(ops_at) - limit} more line(s) in the report" if len(ops_at) > limit else ""
    return "; ".join(shown) + more


def audit_from_report(report: dict[str, Any] | None, tree: str, class_ranges: list[ClassRange],
                      tol: Tolerances, note: str = "") -> ResidencyAudit:
    if report is None:
        return ResidencyAudit(False, note or "op accounting unavailable (no emulated device in this run)")
    details = _findings(report.get("cpu_op_details", ()))
    f64_details = _findings(report.get("float64_op_details", ()))
    complex_details = _findings(report.get("complex_op_details", ()))
    api_sites = {os.path.realpath(_split(s)[0]) + f":{_split(s)[1]}" for s in report.get("api_host_sites", ())}

    def api_mandated(op: str, loc: str) -> bool:
        path, line = _split(loc)
        full = os.path.realpath(path if os.path.isabs(path) else os.path.join(tree, path))
        return op in API_HOST_OPS and f"{full}:{line}" in api_sites

    expected = [d for d in details if d.locations and all(api_mandated(d.op, loc) for loc in d.locations)]
    reasons: list[str] = []
    verdict = Verdict.PASS
    counted_ops = tuple(d for d in details if d.op not in _HOST_PIPELINE_OPS and d not in expected)
    counted = sum(d.elements for d in counted_ops)
    total_el = report["device_elements"] + counted
    share = counted / total_el if total_el else 0.0
    # Views, tensors made from host data and the copies to the device are how a module brings
    # host data in (RetinaNet's anchors: numpy -> torch.from_numpy -> .to(device)), not compute.
    model_locs = {
        d: sorted(loc for loc in d.locations if _in_model_code(loc, tree, class_ranges) and not api_mandated(d.op, loc))
        if d.op not in _HOST_PIPELINE_OPS and d.op not in _TRANSFER_OPS else []
        for d in details
    }
    model_cpu = [d for d in details if model_locs[d]]
    if model_cpu:
        verdict = Verdict.WARN
        where = ", ".join(sorted({loc for d in model_cpu for loc in model_locs[d]})[:5])
        reasons.append(f"{sum(d.count for d in model_cpu)} op(s) inside model code ran on the CPU ({where})")
    expected_work: list[str] = []
    api_used = sorted({loc for d in details for loc in d.locations if api_mandated(d.op, loc)})
    if api_used:
        ops = sorted({d.op.removeprefix("aten::") for d in details if any(api_mandated(d.op, loc) for loc in d.locations)})
        expected_work.append(
            f"packed-sequence API: host bookkeeping of lengths / batch sizes ({', '.join(ops)}) at "
            f"{', '.join(api_used[:5])} — PyTorch requires it on the host on every device")
    if share > tol.residency_fail_share:
        verdict = Verdict.FAIL
        # The share alone named no line: the three ops that processed the most elements say where.
        largest = tuple(sorted(counted_ops, key=lambda d: -d.elements)[:3])
        reasons.append(f"{share:.1%} of all elements were processed on the CPU (limit {tol.residency_fail_share:.0%}; "
                       f"most at {_lines(largest)})")
    if report["float64_ops"]:
        verdict = max(verdict, Verdict.WARN, key=lambda v: v.rank)
        reasons.append(f"{report['float64_ops']} float64 op(s): Trainium computes float64 in float32 "
                       f"(at {_lines(f64_details)})")
    if report["complex_ops"]:
        verdict = max(verdict, Verdict.WARN, key=lambda v: v.rank)
        reasons.append(f"{report['complex_ops']} complex op(s): complex dtypes are unsupported on Trainium "
                       f"(at {_lines(complex_details)})")
    # CPU_FALLBACK ops (backend/op_support.toml): computed on the emulated device, on the host on
    # Trainium (TorchNeuron copies their inputs over and the result back). Slower, not wrong: listed.
    fallbacks = tuple(CpuOpFinding(d["op"], int(d["count"]), 0, tuple(d["locations"]))
                      for d in report.get("fallback_ops", ()))
    return ResidencyAudit(
        True, note, report["device_ops"], report["cpu_ops"], report["device_elements"], report["cpu_elements"],
        report["float64_ops"], report["complex_ops"], details, verdict, tuple(reasons), tuple(expected_work),
        optimizer_host_ops=int(report.get("optimizer_host_ops", 0)), fallback_ops=fallbacks,
        float64_op_details=f64_details, complex_op_details=complex_details,
    )
