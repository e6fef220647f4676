"""The HTML report: one self-contained page (inline CSS and JS, no network) for people.

It shows the run's summary, manual actions with guidance and effort, fixable findings, per-file
diffs with the rule codes of their edits, failed files, and -- given a validate report (the
JSON ``validate --report x.json`` writes) -- the verdict, the first divergence, a chart of each
tensor's error against its allowed bound (inline SVG, per step, modules in forward order: where
the port departs shows at a glance) and the tensor table. A Content-Security-Policy forbids every fetch, so a page that tried to load
anything would log an error (tests/report/test_html_browser.py loads it in Chromium).
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Mapping
from typing import Any

from cuda2neuron import __version__
from cuda2neuron.core import FileResult, Finding

from ._docs import rule_help_uri
from ._model import RunReport, describe_effort

__all__ = ["ValidationReportError", "load_validation", "to_html"]

# Rows of the tensor table; a long training run compares thousands of tensors.
_MAX_TENSOR_ROWS = 500


class ValidationReportError(ValueError):
    """The validate report given to the HTML report is not one."""


def load_validation(text: str, name: str) -> dict[str, Any]:
    """Parse a validate JSON report, or raise ValidationReportError naming ``name``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationReportError(f"{name}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or "verdict" not in data or not isinstance(data.get("comparisons", []), list):
        raise ValidationReportError(f"{name}: not a validate report (write one with `cuda2neuron validate ... --report FILE.json`)")
    return data


_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--add:#dafbe1;--del:#ffebe9;
--pass:#1a7f37;--warn:#9a6700;--fail:#cf222e}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
margin:0 auto;max-width:1200px;padding:16px 24px}h1{font-size:22px}h2{font-size:18px;margin-top:28px;
border-bottom:1px solid var(--line);padding-bottom:4px}code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
table{border-collapse:collapse;width:100%;margin:8px 0}th,td{border:1px solid var(--line);padding:4px 8px;
text-align:left;vertical-align:top}th{background:var(--bg)}.cards{display:flex;flex-wrap:wrap;gap:8px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:110px;background:var(--bg)}
.card b{display:block;font-size:20px}.muted{color:var(--muted)}.badge{display:inline-block;border-radius:10px;
padding:0 7px;font-size:12px;border:1px solid var(--line);background:#fff;margin-left:4px}
.PASS{color:var(--pass)}.WARN{color:var(--warn)}.FAIL,.ERROR{color:var(--fail)}.verdict{font-size:20px;font-weight:700}
details{border:1px solid var(--line);border-radius:6px;margin:8px 0}summary{cursor:pointer;padding:6px 10px;background:var(--bg)}
.diff{width:100%;border:0;margin:0}.diff td{border:0;padding:0 6px;white-space:pre-wrap;word-break:break-all}
.diff td.n{color:var(--muted);text-align:right;width:1%;white-space:nowrap;user-select:none}
tr.add td{background:var(--add)}tr.del td{background:var(--del)}tr.hunk td{color:var(--muted);background:#eef3f8}
#filter{width:100%;padding:6px 8px;margin:8px 0;border:1px solid var(--line);border-radius:6px}
.hidden{display:none}td.mono{overflow-wrap:anywhere;min-width:12em}
svg.chart{width:100%;height:auto;border:1px solid var(--line);border-radius:6px;background:#fff;margin:6px 0}
svg.chart text{font:11px system-ui,sans-serif;fill:var(--muted)}svg.chart .bound{stroke:var(--fg);stroke-width:1}
svg.chart .failline{stroke:var(--fail);stroke-dasharray:4 3}svg.chart .step{stroke:var(--line)}
svg.chart .PASS{fill:var(--pass)}svg.chart .WARN{fill:var(--warn)}svg.chart .FAIL{fill:var(--fail)}
svg.chart .unjudged{fill:none;stroke:var(--muted)}
"""

# Filtering by text (a path, a rule code) across every table row and file; the counter tells
# the reader (and the browser test) that the script ran.
_JS = """
(function(){
  var input=document.getElementById('filter');
  var items=Array.prototype.slice.call(document.querySelectorAll('[data-filter]'));
  var shown=document.getElementById('shown');
  function apply(){
    var q=input.value.trim().toLowerCase();var n=0;
    items.forEach(function(el){var hit=!q||el.getAttribute('data-filter').toLowerCase().indexOf(q)>=0;
      el.classList.toggle('hidden',!hit);if(hit){n++;}});
    shown.textContent=n+' of '+items.length+' items shown';
  }
  // A link can carry a filter: report.html#q=CN606
  var m=/[#&]q=([^&]*)/.exec(location.hash);if(m){input.value=decodeURIComponent(m[1]);}
  input.addEventListener('input',apply);apply();
  // Each chart says how many of its points the browser drew (the browser test reads it back).
  Array.prototype.forEach.call(document.querySelectorAll('svg.chart'),function(svg){
    var n=0;Array.prototype.forEach.call(svg.querySelectorAll('.pt'),function(p){
      var b=p.getBBox();if(b.width>0&&b.height>0){n++;}});
    svg.setAttribute('data-drawn',n);});
  document.body.setAttribute('data-ready','1');
})();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _path(text: str) -> str:
    """A path for a table cell: a break allowed after each slash (issue 43: a 149-character path
    stretched the findings table past the page); td.mono breaks anywhere as a last resort."""
    return _e(text).replace("/", "/<wbr>")


def _rule_link(code: str, name: str = "") -> str:
    label = _e(code) + (f" <span class=muted>{_e(name)}</span>" if name else "")
    uri = rule_help_uri(code)
    return f'<a href="{_e(uri)}">{label}</a>' if uri else label


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _summary(report: RunReport) -> list[str]:
    cards = [
        ("files scanned", report.scanned),
        ("changed", report.changed),
        ("failed", len(report.failed)),
        ("edits", len(report.edits)),
        ("fixable", len(report.fixable) + len(report.unsafe_fixable)),
        ("manual actions", len(report.manual)),
        ("lines still mention CUDA", len(report.residual)),
        ("coverage", _pct(report.coverage)),
        ("effort left", describe_effort(report.effort_hours)),
    ]
    out = ['<section id="summary"><h2>Summary</h2><div class="cards">']
    out += [f'<div class="card"><b>{_e(v)}</b><span class=muted>{_e(k)}</span></div>' for k, v in cards]
    out.append("</div>")
    if report.edits_per_rule:
        out.append("<h3>Edits per rule</h3><table><tr><th>rule</th><th>edits</th></tr>")
        for rule, n in report.edits_per_rule.items():
            code, _, name = rule.partition(" ")
            out.append(f'<tr data-filter="{_e(rule)}"><td>{_rule_link(code, name)}</td><td>{n}</td></tr>')
        out.append("</table>")
    out.append("</section>")
    return out


def _findings_table(title: str, anchor: str, findings: tuple[Finding, ...], fix_column: bool) -> list[str]:
    if not findings:
        return []
    head = "<th>location</th><th>rule</th><th>effort</th><th>finding</th><th>what to do</th>"
    if fix_column:
        head += "<th>fix</th>"
    out = [f'<section id="{anchor}"><h2>{_e(title)} ({len(findings)})</h2><table><tr>{head}</tr>']
    for f in findings:
        where = f"{f.path}:{f.span.start_line}:{f.span.start_col + 1}"
        row = (
            f'<tr data-filter="{_e(where + " " + f.code + " " + f.name)}"><td class=mono>{_path(where)}</td>'
            f"<td>{_rule_link(f.code, f.name)}</td><td>{_e(f.effort.value)}</td><td>{_e(f.message)}</td>"
            f"<td>{_e(f.guidance) or '<span class=muted>-</span>'}</td>"
        )
        if fix_column and f.fix is not None:
            row += f"<td>{_e(f.fix.safety.value)}: <code>{_e(f.fix.description or f.fix.replacement)}</code></td>"
        elif fix_column:
            row += "<td></td>"
        out.append(row + "</tr>")
    out.append("</table></section>")
    return out


def _diff_rows(r: FileResult) -> list[str]:
    assert r.old_bytes is not None and r.new_bytes is not None
    old = r.old_bytes.decode("utf-8", "replace").splitlines()
    new = r.new_bytes.decode("utf-8", "replace").splitlines()
    # Which rules wrote which original lines: an edit's span is in the source as read.
    codes: dict[int, list[str]] = {}
    for f in r.findings:
        if f.applied:
            for line in range(f.span.start_line, f.span.end_line + 1):
                codes.setdefault(line, [])
                if f.code not in codes[line]:
                    codes[line].append(f.code)
    rows: list[str] = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        rows.append(
            f'<tr class="hunk"><td class=n></td><td class=n></td><td>@@ -{first[1] + 1},{last[2] - first[1]} '
            f"+{first[3] + 1},{last[4] - first[3]} @@</td></tr>"
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for k in range(i2 - i1):
                    rows.append(f"<tr><td class=n>{i1 + k + 1}</td><td class=n>{j1 + k + 1}</td><td>  {_e(old[i1 + k])}</td></tr>")
                continue
            for i in range(i1, i2):
                badges = "".join(f'<span class="badge rule">{_e(c)}</span>' for c in codes.get(i + 1, ()))
                rows.append(f'<tr class="del"><td class=n>{i + 1}</td><td class=n></td><td>- {_e(old[i])}{badges}</td></tr>')
            for j in range(j1, j2):
                rows.append(f'<tr class="add"><td class=n></td><td class=n>{j + 1}</td><td>+ {_e(new[j])}</td></tr>')
    return rows


def _files(report: RunReport) -> list[str]:
    changed = [r for r in report.results if r.old_bytes is not None and r.new_bytes is not None]
    if not changed:
        return []
    out = [f'<section id="diffs"><h2>Changes per file ({len(changed)})</h2>']
    for r in changed:
        codes = sorted({f.code for f in r.findings if f.applied})
        badges = "".join(f'<span class="badge rule">{_e(c)}</span>' for c in codes)
        left = sum(1 for f in r.findings if not f.applied)
        note = f' <span class=muted>{left} finding(s) left</span>' if left else ""
        out.append(
            f'<details open data-filter="{_e(r.path + " " + " ".join(codes))}"><summary class=mono>{_e(r.path)}'
            f"{badges}{note}</summary><table class=\"diff mono\">"
        )
        out += _diff_rows(r)
        out.append("</table></details>")
    out.append("</section>")
    return out


def _failed(report: RunReport) -> list[str]:
    if not report.failed and not report.skipped:
        return []
    out = ['<section id="failed"><h2>Failed and skipped files</h2><table><tr><th>file</th><th>problem</th></tr>']
    for r in report.failed:
        assert r.error is not None
        where = f"{r.path}:{r.error.line}" if r.error.line else r.path
        out.append(f'<tr data-filter="{_e(where)}"><td class=mono>{_path(where)}</td><td class=FAIL>{_e(r.error.kind)}: {_e(r.error.message)}</td></tr>')
    for s in report.skipped:
        out.append(f'<tr data-filter="{_e(s.path)}"><td class=mono>{_path(s.path)}</td><td>skipped: {_e(s.reason)}</td></tr>')
    out.append("</table></section>")
    return out


def _number(x: Any) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:.2e}"
    return "-" if x is None else _e(x)


# The chart: each tensor's error as a multiple of its allowed bound, log scale, PASS under 1.
_CHART_W, _CHART_H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 1000, 200, 46, 10, 12, 26
_LOG_MIN, _LOG_MAX = -3.0, 3.0  # 1/1000 to 1000 times the bound (beyond: drawn at the edge)
_MAX_POINTS = 3000


def _ratio(c: Mapping[str, Any]) -> float | None:
    err, allowed = c.get("port_error"), c.get("allowed")
    if not isinstance(err, (int, float)) or not isinstance(allowed, (int, float)) or allowed <= 0:
        return None
    return max(float(err), 1e-30) / float(allowed)


def _chart(rows: list[Mapping[str, Any]], title: str, fail_at: float) -> list[str]:
    """An inline SVG (no script, no fetch): x is the recording order — per step, the modules in
    forward order, then the loss and gradients — y is log10(error / allowed); the line at 1 is the
    bound, the dashed one where FAIL starts. Points carry their tensor and numbers as a tooltip."""
    import math

    points = [(c, r) for c in rows if (r := _ratio(c)) is not None]
    if not points:
        return []
    total = len(points)
    if total > _MAX_POINTS:  # every tensor that did not pass, and an even sample of the rest
        keep = {id(c) for c, _ in points if c.get("verdict") != "PASS"}
        stride = max(1, total // (_MAX_POINTS - len(keep)) + 1) if len(keep) < _MAX_POINTS else total
        points = [(c, r) for i, (c, r) in enumerate(points) if id(c) in keep or i % stride == 0]
    w = _CHART_W - _PAD_L - _PAD_R
    h = _CHART_H - _PAD_T - _PAD_B

    def y(log: float) -> float:
        log = min(max(log, _LOG_MIN), _LOG_MAX)
        return _PAD_T + (_LOG_MAX - log) / (_LOG_MAX - _LOG_MIN) * h

    def x(i: int) -> float:
        return _PAD_L + (i + 0.5) * w / len(points)

    out = [f'<svg class="chart" viewBox="0 0 {_CHART_W} {_CHART_H}" role="img" aria-label="{_e(title)}">']
    for tick in range(int(_LOG_MIN), int(_LOG_MAX) + 1):
        label = "bound" if tick == 0 else f"{10.0 ** tick:g}×"
        out.append(f'<text x="{_PAD_L - 4}" y="{y(tick) + 4:.1f}" text-anchor="end">{label}</text>')
    out.append(f'<line class="bound" x1="{_PAD_L}" x2="{_CHART_W - _PAD_R}" y1="{y(0):.1f}" y2="{y(0):.1f}"/>')
    fail_y = y(math.log10(fail_at))
    out.append(f'<line class="failline" x1="{_PAD_L}" x2="{_CHART_W - _PAD_R}" y1="{fail_y:.1f}" y2="{fail_y:.1f}"/>')
    out.append(f'<text x="{_CHART_W - _PAD_R}" y="{fail_y - 3:.1f}" text-anchor="end">FAIL beyond</text>')
    step = None
    labelled = -1e9  # where the last step label went: labels that would overlap are left out
    for i, (c, r) in enumerate(points):
        s = c.get("step")
        if s != step:
            step = s
            sx = x(i) - w / len(points) / 2
            out.append(f'<line class="step" x1="{sx:.1f}" x2="{sx:.1f}" y1="{_PAD_T}" y2="{_PAD_T + h}"/>')
            if sx - labelled >= 52:
                label = "final" if "final/" in str(c.get("key")) else f"step {s}"
                out.append(f'<text x="{sx + 3:.1f}" y="{_CHART_H - 8}">{_e(label)}</text>')
                labelled = sx
        verdict = str(c.get("verdict", ""))
        cls = "unjudged" if c.get("judged") is False else verdict
        tip = (f"{c.get('key')}: error {_number(c.get('port_error'))} / allowed {_number(c.get('allowed'))} "
               f"= {r:.3g}× ({verdict}{', not judged' if c.get('judged') is False else ''})")
        out.append(f'<circle class="pt {_e(cls)}" cx="{x(i):.1f}" cy="{y(math.log10(r)):.1f}" r="2.6">'
                   f"<title>{_e(tip)}</title></circle>")
    out.append("</svg>")
    shown = f" ({len(points)} of {total} shown: every one that did not pass)" if len(points) < total else ""
    return [f"<h4>{_e(title)}{shown}</h4>", *out]


def _charts(data: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> list[str]:
    checks = {str(c.get("check") or "") for c in rows}
    titles = {"logic": "logic check — original and port with autocast off in both",
              "precision": "precision check — the runs as written", "": "error against the allowed bound"}
    tol = data.get("tolerances") or {}
    fail_at = float(tol.get("warn_factor", 32.0)) / float(tol.get("pass_factor", 4.0))
    out = ['<h3 id="chart">Error against the allowed bound</h3>',
           "<p class=muted>One point per tensor, left to right in recording order (per step, the modules in forward "
           "order, then the loss and gradients); height: its error against the float64 golden as a multiple of "
           "the error allowed (log scale). Under the solid line it passes; hollow points were not judged (the "
           "original itself too far from the golden). Hover a point for its name.</p>"]
    for check in ("logic", "precision", ""):
        if check in checks:
            out += _chart([c for c in rows if str(c.get("check") or "") == check], titles[check], fail_at)
    return out


def _validation(data: Mapping[str, Any]) -> list[str]:
    verdict = str(data.get("verdict", "?"))
    counts = data.get("counts") or {}
    checks = data.get("checks") or {}
    split = "".join(f' <span class=muted>·</span> {_e(k)} <span class="{_e(v)}">{_e(v)}</span>' for k, v in checks.items())
    out = [
        '<section id="validation"><h2>Validation</h2>',
        f'<p>Verdict: <span class="verdict {_e(verdict)}">{_e(verdict)}</span>{split} '
        f"<span class=muted>{_e(data.get('mode', ''))} <code>{_e(data.get('target', ''))}</code></span></p>",
        "<table><tr><th>original</th><th>port</th><th>golden (float64 CPU)</th><th>PASS</th><th>not judged</th>"
        "<th>WARN</th><th>FAIL</th></tr>",
        f"<tr><td class=mono>{_e(data.get('original', ''))}</td><td class=mono>{_e(data.get('port', ''))}</td>"
        f"<td>{'used' if data.get('golden_used') else 'not used'}</td><td class=PASS>{_e(counts.get('PASS', 0))}</td>"
        f"<td class=muted>{_e(data.get('not_judged', 0))}</td>"
        f"<td class=WARN>{_e(counts.get('WARN', 0))}</td><td class=FAIL>{_e(counts.get('FAIL', 0))}</td></tr></table>",
    ]
    for failure in data.get("failures") or []:
        out.append(
            f"<h3 class=FAIL>Error: {_e(failure.get('role', ''))} — {_e(failure.get('kind', ''))}</h3>"
            f"<pre>{_e(failure.get('message', ''))}\n{_e(failure.get('traceback', ''))}</pre>"
        )
    d = data.get("divergence")
    if d:
        out.append('<h3 id="divergence">First divergence</h3><ul>')
        out.append(f"<li>tensor <code>{_e(d.get('key'))}</code> ({_e(d.get('kind'))}, step {_e(d.get('step'))}): {_e(d.get('reason'))}</li>")
        if d.get("module_path"):
            out.append(f"<li>module <code>{_e(d['module_path'])}</code> ({_e(d.get('module_class') or '?')})</li>")
        if d.get("class_file"):
            lines = d.get("class_lines")
            where = f"{d['class_file']}:{lines[0]}-{lines[1]}" if lines else d["class_file"]
            out.append(f"<li>source <code>{_e(where)}</code></li>")
        edits = d.get("findings") or []
        out.append(f"<li>{'migrate edits in' if edits else 'no migrate edits found in'} {_e(d.get('findings_scope', ''))}")
        if edits:
            out.append("<ul>")
            out += [
                f"<li>{_rule_link(e.get('code', ''), e.get('name', ''))} at <code>{_e(e.get('path'))}:{_e(e.get('line'))}:{_e(e.get('col'))}</code> — {_e(e.get('message'))}</li>"
                for e in edits
            ]
            out.append("</ul>")
        out.append("</li>")
        for h in d.get("hand_edits") or []:
            out.append(f"<li>hand edit <code>{_e(h.get('path'))}:{_e(h.get('line'))}</code> {_e(h.get('kind'))}: <code>{_e(h.get('text'))}</code></li>")
        out.append("</ul>")
    rows = data.get("comparisons") or []
    if rows:
        out += _charts(data, rows)
        # Not passing first: that is what a reader looks for.
        order = {"FAIL": 0, "ERROR": 0, "WARN": 1}
        rows = sorted(rows, key=lambda c: order.get(str(c.get("verdict")), 2))
        shown = rows[:_MAX_TENSOR_ROWS]
        out.append(
            f"<h3>Tensors compared ({len(rows)}{', first ' + str(len(shown)) + ' shown' if len(shown) < len(rows) else ''})</h3>"
            "<table id=verdicts><tr><th>verdict</th><th>check</th><th>tensor</th><th>kind</th><th>step</th><th>dtype ref→port</th>"
            "<th>max abs</th><th>cosine to golden</th><th>reason</th></tr>"
        )
        for c in shown:
            v = str(c.get("verdict", ""))
            cosine = c.get("port_cosine") if c.get("port_cosine") is not None else c.get("cosine")
            out.append(
                f'<tr data-filter="{_e(v + " " + str(c.get("key", "")))}"><td class="{_e(v)}">{_e(v)}</td>'
                f"<td>{_e(c.get('check') or '-')}</td><td class=mono>{_e(c.get('key'))}</td>"
                f"<td>{_e(c.get('kind'))}</td><td>{_e(c.get('step'))}</td><td>{_e(c.get('dtype_ref'))}→{_e(c.get('dtype_port') or '-')}</td>"
                f"<td>{_number(c.get('max_abs'))}</td><td>{_number(cosine)}</td><td>{_e(c.get('reason', ''))}</td></tr>"
            )
        out.append("</table>")
    for note in data.get("notes") or []:
        out.append(f"<p class=muted>note: {_e(note)}</p>")
    out.append("</section>")
    return out


def to_html(report: RunReport | None, validation: Mapping[str, Any] | None = None) -> str:
    """The page for a migrate/check run, a validate report, or both."""
    if report is None and validation is None:
        raise ValueError("an HTML report needs a run report, a validate report, or both")
    title = f"cuda2neuron {report.command} report" if report is not None else "cuda2neuron validate report"
    body: list[str] = [f"<h1>{_e(title)}</h1>"]
    if report is not None:
        body.append(f"<p class=muted>target <code>{_e(report.target)}</code> · cuda2neuron {_e(__version__)}</p>")
    body.append('<input id="filter" type="search" placeholder="filter by path or rule code, e.g. CN101" aria-label="filter">')
    body.append('<p id="shown" class=muted></p>')
    if validation is not None:
        body += _validation(validation)
    if report is not None:
        body += _summary(report)
        body += _findings_table("Manual actions", "manual", report.manual, fix_column=True)
        body += _findings_table("Fixable (check --fix, unsafe ones with --unsafe-fixes)", "fixable", (*report.fixable, *report.unsafe_fixable), fix_column=True)
        body += _files(report)
        body += _failed(report)
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
        "script-src 'unsafe-inline'\">"
        f"<meta name=viewport content=\"width=device-width,initial-scale=1\"><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + f"\n<script>{_JS}</script>\n</body></html>\n"
    )
