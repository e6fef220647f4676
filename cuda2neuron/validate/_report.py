"""Render a ValidationResult: JSON (machines), Markdown (files, PRs) and a rich summary (people).

Pure functions from the frozen result to text / renderables; the command decides where they go.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

from cuda2neuron.validate._model import ValidationResult, Verdict

__all__ = ["to_json", "to_markdown", "to_rich"]

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


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.2e}"


def _where(locations: tuple[str, ...]) -> str:
    # An op with no user frame ran inside torch or a library, e.g. the step counters that
    # torch.optim keeps on the host on every device.
    return ", ".join(locations[:3]) if locations else "(no line of your code: inside torch or a library)"


def _interesting(result: ValidationResult) -> list[Any]:
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
        out += [f"## Error: {f.role} — {f.kind}", "", f.message, ""]
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
    rows = _interesting(result)
    if rows:
        out += ["## Tensors that did not pass", "", "| verdict | tensor | dtype ref→port | max abs | cosine | reason |",
                "|---|---|---|---|---|---|"]
        for c in rows:
            out.append(f"| {c.verdict.value} | `{c.key}` | {c.dtype_ref}→{c.dtype_port or '-'} | {_fmt(c.max_abs)} | "
                       f"{_fmt(c.cosine)} | {c.reason} |")
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
                    out.append(f"| `{op.op}` | {op.count} | {op.elements} | {_where(op.locations)} |")
            out.append("")
    return "\n".join(out) + "\n"


def _hand_edits_md(edits) -> list[str]:
    if not edits:
        return []
    return ["- port lines migrate did not write (edited by hand after migrate):"] + [
        f"  - `{h.path}:{h.line}` {h.kind}: `{h.text}`" for h in edits
    ]


def _hand_edits_rich(text, edits, indent: str) -> None:
    if not edits:
        return
    text.append(f"{indent}port lines migrate did not write (edited by hand after migrate):\n")
    for h in edits:
        text.append(f"{indent}  {h.kind:7s} ", style="bold magenta")
        text.append(f"{h.path}:{h.line}  {h.text}\n")


_STYLE = {Verdict.PASS: "bold green", Verdict.WARN: "bold yellow", Verdict.FAIL: "bold red", Verdict.ERROR: "bold red"}


def to_rich(result: ValidationResult) -> list[Any]:
    """Renderables for a rich Console (stderr)."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    counts = result.counts()
    head = Text()
    head.append(f"{result.verdict.value}", style=_STYLE[result.verdict])
    head.append(f"  {result.mode} `{result.target}`  —  {len(result.comparisons)} tensors: "
                f"{counts['PASS']} pass, {counts['WARN']} warn, {counts['FAIL']} fail")
    lines = [head, Text(f"original  {result.original}", style="dim"), Text(f"port      {result.port}", style="dim")]
    for run in result.runs:
        lines.append(Text(f"{run.role:9s} {run.device}  ({run.records} records, {run.seconds:.1f} s)", style="dim"))
    for note in result.notes:
        lines.append(Text(f"note: {note}", style="yellow"))
    parts.append(Panel(Text("\n").join(lines), title="cuda2neuron validate", expand=False))
    for f in result.failures:
        body = Text(f.message + ("\n\n" + f.traceback.rstrip() if f.traceback else ""))
        parts.append(Panel(body, title=f"error: {f.role} — {f.kind}", border_style="red", expand=False))
    d = result.divergence
    if d is not None:
        t = Text()
        t.append(f"{d.key}", style="bold")
        t.append(f" ({d.kind}, step {d.step}): {d.reason}\n")
        if d.module_path:
            t.append(f"module {d.module_path} ({d.module_class or '?'})\n")
        if d.class_file:
            t.append(f"source {d.class_file}" + (f":{d.class_lines[0]}-{d.class_lines[1]}" if d.class_lines else "") + "\n")
        t.append(f"migrate edits in {d.findings_scope}:\n" if d.findings else f"no migrate edits in {d.findings_scope}\n")
        for e in d.findings:
            t.append(f"  {e.code} ", style="bold cyan")
            t.append(f"{e.path}:{e.line}:{e.col} {e.name} — {e.message}\n")
        _hand_edits_rich(t, d.hand_edits, "")
        parts.append(Panel(t, title="first divergence", border_style="red", expand=False))
    rows = _interesting(result)
    if rows:
        table = Table(title="tensors that did not pass", show_lines=False)
        for col in ("verdict", "tensor", "dtype", "max abs", "cosine", "reason"):
            table.add_column(col)
        for c in rows:
            table.add_row(Text(c.verdict.value, style=_STYLE[c.verdict]), c.key, f"{c.dtype_ref}→{c.dtype_port or '-'}",
                          _fmt(c.max_abs), _fmt(c.cosine), c.reason)
        parts.append(table)
    a = result.audit
    if a is not None:
        if not a.available:
            parts.append(Text(f"residency: {a.note}", style="dim"))
        else:
            t = Text()
            t.append(f"residency {a.verdict.value}", style=_STYLE[a.verdict])
            t.append(f": {a.op_share_on_device:.1%} of ops, {a.element_share_on_device:.1%} of elements on device; "
                     f"float64 ops {a.float64_ops}, complex ops {a.complex_ops}\n")
            for r in a.reasons:
                t.append(f"  {r}\n")
            for r in a.expected_host_work:
                t.append(f"  expected host work: {r}\n", style="dim")
            for op in a.cpu_op_details[:10]:
                t.append(f"  CPU {op.op} x{op.count} ({op.elements} el) at {_where(op.locations)}\n", style="dim")
            _hand_edits_rich(t, a.hand_edits, "  ")
            parts.append(t)
    return parts
