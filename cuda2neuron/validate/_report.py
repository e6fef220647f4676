"""Render a ValidationResult as text: JSON (machines) and Markdown (files, PRs).

Pure functions from the frozen result to text; the CLI decides where it goes, and draws the
summary people read on the terminal (`cuda2neuron.cli._validate`) from the helpers shared here.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

from cuda2neuron.validate._model import ValidationResult, Verdict

__all__ = ["format_locations", "format_value", "not_passing", "to_json", "to_markdown"]

_MAX_ROWS = 40


def _clean(obj: Any) -> Any:
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, float):
        return None if math.isnan(obj) else (str(obj) if math.isinf(obj) else obj)
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def to_json(result: ValidationResult) -> str:
    data = _clean(dataclasses.asdict(result))
    data["exit_code"] = result.exit_code
    data["counts"] = result.counts()
    if result.audit is not None:
        data["audit"]["op_share_on_device"] = result.audit.op_share_on_device
        data["audit"]["element_share_on_device"] = result.audit.element_share_on_device
    return json.dumps(data, indent=2) + "\n"


def format_value(x: float | None) -> str:
    """A difference or a cosine in a table cell: ``1.23e-04``, ``-`` for none."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.2e}"


def format_locations(locations: tuple[str, ...]) -> str:
    """Where a CPU op ran: the first user lines, never blank."""
    # An op with no user frame ran inside torch or a library, e.g. the step counters that
    # torch.optim keeps on the host on every device.
    return ", ".join(locations[:3]) if locations else "(no line of your code: inside torch or a library)"


def not_passing(result: ValidationResult) -> list[Any]:
    """The comparisons a reader is shown: those that did not pass, at most _MAX_ROWS."""
    bad = [c for c in result.comparisons if c.verdict is not Verdict.PASS]
    return bad[:_MAX_ROWS]


def to_markdown(result: ValidationResult) -> str:
    out: list[str] = [f"# cuda2neuron validate: {result.verdict.value}", ""]
    out.append(f"- mode: {result.mode} (`{result.target}`)")
    out.append(f"- original: `{result.original}`")
    out.append(f"- port: `{result.port}`")
    out.append(f"- golden (float64 CPU): {'used' if result.golden_used else 'not used'}")
    counts = result.counts()
    out.append(f"- tensors compared: {len(result.comparisons)} "
               f"(PASS {counts['PASS']}, WARN {counts['WARN']}, FAIL {counts['FAIL']})")
    for run in result.runs:
        out.append(f"- {run.role} run: {run.device}, {run.records} records, {run.seconds:.1f} s")
    for note in result.notes:
        out.append(f"- note: {note}")
    out.append("")
    for f in result.failures:
        title = f"## Port defect: {f.role} raised at {f.location}" if f.kind == "defect" else f"## Error: {f.role} — {f.kind}"
        out += [title, "", f.message, ""]
        if f.traceback:
            out += ["```", f.traceback.rstrip(), "```", ""]
    d = result.divergence
    if d is not None:
        out += ["## First divergence", "", f"- tensor: `{d.key}` ({d.kind}, step {d.step}): {d.reason}"]
        if d.module_path:
            out.append(f"- module: `{d.module_path}` ({d.module_class or '?'})")
        if d.class_file:
            out.append(f"- source: `{d.class_file}:{d.class_lines[0]}-{d.class_lines[1]}`" if d.class_lines
                       else f"- source: `{d.class_file}`")
        out.append(f"- migrate edits in {d.findings_scope}:" if d.findings else
                   f"- no migrate edits found in {d.findings_scope}")
        for e in d.findings:
            out.append(f"  - `{e.code}` {e.name} at `{e.path}:{e.line}:{e.col}` — {e.message}")
        out += _hand_edits_md(d.hand_edits)
        out.append("")
    rows = not_passing(result)
    if rows:
        out += ["## Tensors that did not pass", "", "| verdict | tensor | dtype ref→port | max abs | cosine | reason |",
                "|---|---|---|---|---|---|"]
        for c in rows:
            out.append(f"| {c.verdict.value} | `{c.key}` | {c.dtype_ref}→{c.dtype_port or '-'} | {format_value(c.max_abs)} | "
                       f"{format_value(c.cosine)} | {c.reason} |")
        out.append("")
    a = result.audit
    if a is not None:
        out += ["## Device residency (port run)", ""]
        if not a.available:
            out += [f"- {a.note}", ""]
        else:
            out.append(f"- verdict: {a.verdict.value}")
            out.append(f"- ops on device: {a.op_share_on_device:.1%} ({a.device_ops} device, {a.cpu_ops} CPU)")
            out.append(f"- elements on device: {a.element_share_on_device:.1%}")
            out.append(f"- float64 ops: {a.float64_ops}, complex ops: {a.complex_ops}")
            for r in a.reasons:
                out.append(f"- finding: {r}")
            for r in a.expected_host_work:
                out.append(f"- expected host work: {r}")
            out += _hand_edits_md(a.hand_edits)
            if a.cpu_op_details:
                out += ["", "| CPU op | count | elements | where |", "|---|---|---|---|"]
                for op in a.cpu_op_details[:_MAX_ROWS]:
                    out.append(f"| `{op.op}` | {op.count} | {op.elements} | {format_locations(op.locations)} |")
            out.append("")
    return "\n".join(out) + "\n"


def _hand_edits_md(edits) -> list[str]:
    if not edits:
        return []
    return ["- port lines migrate did not write (edited by hand after migrate):"] + [
        f"  - `{h.path}:{h.line}` {h.kind}: `{h.text}`" for h in edits
    ]
