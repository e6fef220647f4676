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

__all__ = ["format_locations", "format_value", "headline", "not_passing", "residency_line", "to_json", "to_markdown",
           "verdict_line"]

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
    data["not_judged"] = result.not_judged
    data["checks"] = {k: v.value for k, v in result.checks().items()}
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


def not_passing(result: ValidationResult, limit: int = _MAX_ROWS) -> tuple[list[Any], int]:
    """The comparisons a reader is shown — those that did not pass, FAILs first, in recording
    order, at most ``limit`` — and how many more there are (said, never dropped silently)."""
    bad = [c for c in result.comparisons if c.verdict is Verdict.FAIL]
    bad += [c for c in result.comparisons if c.verdict is Verdict.WARN]
    return bad[:limit], max(0, len(bad) - limit)


def verdict_line(result: ValidationResult) -> str:
    """The verdict as one line of ``key=value`` words for stdout (pipes, CI): stable, no styling.

    ``FAIL logic=FAIL precision=PASS tensors=566 pass=500 warn=2 fail=64 not_judged=12 residency=PASS first=logic/s0/fwd/0:head#0``
    """
    words = [result.verdict.value]
    words += [f"{check}={v.value}" for check, v in result.checks().items()]
    counts = result.counts()
    words += [f"tensors={len(result.comparisons)}", f"pass={counts['PASS']}", f"warn={counts['WARN']}",
              f"fail={counts['FAIL']}", f"not_judged={result.not_judged}"]
    if result.not_exercised:
        words.append(f"not_exercised={len(result.not_exercised)}")
    if result.audit is not None and result.audit.available:
        words.append(f"residency={result.audit.verdict.value}")
    if result.divergence is not None:
        words.append(f"first={result.divergence.key}")
    words += [f"error={f.role.replace(' ', '-')}:{f.kind}" for f in result.failures if f.kind != "defect"]
    return " ".join(words)


def headline(result: ValidationResult) -> str:
    """``logic PASS · precision FAIL`` and the counts, as the summary's first line says them."""
    checks = result.checks()
    split = " · ".join(f"{check} {v.value}" for check, v in checks.items())
    if checks and "logic" not in checks:
        split = "logic not run · " + split
    counts = result.counts()
    judged = f" ({result.not_judged} not judged)" if result.not_judged else ""
    tally = (f"{len(result.comparisons)} tensors: {counts['PASS']} pass{judged}, {counts['WARN']} warn, "
             f"{counts['FAIL']} fail")
    if result.not_exercised:
        tally += f"; {len(result.not_exercised)} module(s) not exercised"
    return f"{split}  —  {tally}" if split else tally


def residency_line(a: Any) -> str:
    """The audit's shares; the optimizer's host step counters are counted apart."""
    apart = (f" ({a.optimizer_host_ops} one-element optimizer step-counter ops on the host, as on every device, "
             "counted apart)" if a.optimizer_host_ops else "")
    host = getattr(a, "fallback_ops", ())
    fallback = (f"; {sum(op.count for op in host)} op(s) would run on the host on Trainium "
                f"({', '.join(op.op for op in host)}: CPU_FALLBACK)" if host else "")
    return (f"{a.op_share_on_device:.1%} of ops{apart}, {a.element_share_on_device:.1%} of elements on device; "
            f"float64 ops {a.float64_ops}, complex ops {a.complex_ops}{fallback}")


def to_markdown(result: ValidationResult) -> str:
    out: list[str] = [f"# cuda2neuron validate: {result.verdict.value}", ""]
    out.append(f"- mode: {result.mode} (`{result.target}`)")
    out.append(f"- original: `{result.original}`")
    out.append(f"- port: `{result.port}`")
    out.append(f"- golden (float64 CPU): {'used' if result.golden_used else 'not used'}")
    out.append(f"- verdict: {headline(result)}")
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
    rows, more = not_passing(result)
    if rows:
        out += ["## Tensors that did not pass", "", "| verdict | check | tensor | dtype ref→port | max abs | cosine to golden | reason |",
                "|---|---|---|---|---|---|---|"]
        for c in rows:
            out.append(f"| {c.verdict.value} | {c.check or '-'} | `{c.key}` | {c.dtype_ref}→{c.dtype_port or '-'} | "
                       f"{format_value(c.max_abs)} | {format_value(c.port_cosine)} | {c.reason.replace('|', '/')} |")
        if more:
            out.append(f"| … | | {more} more not shown | | | | the JSON report (`--report FILE.json`) lists every one |")
        out.append("")
    a = result.audit
    if a is not None:
        out += ["## Device residency (port run)", ""]
        if not a.available:
            out += [f"- {a.note}", ""]
        else:
            out.append(f"- verdict: {a.verdict.value}")
            apart = f", of them {a.optimizer_host_ops} optimizer step counters, counted apart" if a.optimizer_host_ops else ""
            out.append(f"- ops on device: {a.op_share_on_device:.1%} ({a.device_ops} device, {a.cpu_ops} CPU{apart})")
            out.append(f"- elements on device: {a.element_share_on_device:.1%}")
            out.append(f"- float64 ops: {a.float64_ops}, complex ops: {a.complex_ops}")
            for r in a.reasons:
                out.append(f"- finding: {r}")
            for r in a.expected_host_work:
                out.append(f"- expected host work: {r}")
            for op in a.fallback_ops:
                out.append(f"- would run on the host on Trainium (CPU_FALLBACK): `{op.op}` x{op.count} at "
                           f"{format_locations(op.locations)}")
            out += _hand_edits_md(a.hand_edits)
            for label, ops in (("float64", a.float64_op_details), ("complex", a.complex_op_details)):
                for op in ops[:_MAX_ROWS]:
                    out.append(f"- {label} on the device: `{op.op}` x{op.count} at {format_locations(op.locations)}")
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
