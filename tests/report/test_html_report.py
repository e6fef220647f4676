"""The HTML report: content checks on the page, and the page loaded in headless Chromium
(the distribution's package: `apt-get install chromium`; .ci/run installs it) with no console
message, its script run, and its content read back from the browser's DOM."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cuda2neuron.cli import main
from cuda2neuron.report import ValidationReportError, load_validation, to_html
from cuda2neuron.validate._model import (
    Divergence,
    EditFinding,
    TensorComparison,
    ValidationResult,
    Verdict,
)
from cuda2neuron.validate._report import to_json as validation_json

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (apt-get install chromium)")


def _comparison(key: str, verdict: Verdict, step: int = 0) -> TensorComparison:
    return TensorComparison(
        key=key, kind="loss" if key == "loss" else "grad", step=step, module_path="net.fc", module_class="Linear",
        shape_ref=(2, 2), shape_port=(2, 2), dtype_ref="float32", dtype_port="float32", device_ref="cpu",
        device_port="neuron", max_abs=0.5 if verdict is Verdict.FAIL else 1e-7, max_rel=0.1, cosine=0.9,
        ref_error=1e-7, port_error=0.5, allowed=1e-5, nonfinite_mismatch=0, verdict=verdict,
        reason="port error 5.0e-01 > allowed 1.0e-05" if verdict is Verdict.FAIL else "",
    )


VALIDATION = validation_json(
    ValidationResult(
        verdict=Verdict.FAIL, mode="entry", target="train:build", original="/src", port="/port", golden_used=True,
        comparisons=(_comparison("loss", Verdict.PASS), _comparison("grad:net.fc.weight", Verdict.FAIL, 1)),
        divergence=Divergence(
            key="grad:net.fc.weight", kind="grad", step=1, module_path="net.fc", module_class="Linear",
            class_file="model.py", class_lines=(3, 9),
            findings=(EditFinding("CN301", "cuda-amp-autocast", "autocast moved", "model.py", 5, 9),),
            findings_scope="model.py:3-9", reason="first tensor that fails",
        ),
    )
)


class _Text(HTMLParser):
    """Visible text and element ids of a page (script and style left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.hidden_rows = 0
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if "hidden" in (a.get("class") or "").split():
            self.hidden_rows += 1
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def _parse(page: str) -> _Text:
    p = _Text()
    p.feed(page)
    return p


def _migrate_page(tmp_path: Path, run_main, *extra: str) -> Path:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "train.py").write_text("import torch\nmodel = Net().cuda()\nimport apex\nx = 1\n")
    (src / "pkg" / "bench.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    (src / "pkg" / "broken.py").write_text("x = y.cuda()\ndef (:\n")
    page = tmp_path / "report.html"
    code = run_main(["migrate", str(src), "--out", str(tmp_path / "out"), "--report", str(page), "-q", *extra])
    assert code == 1  # broken.py failed; the others were written
    return page


def test_page_content(tmp_path):
    (tmp_path / "v.json").write_text(VALIDATION)
    page = _migrate_page(tmp_path, main, "--validate-report", str(tmp_path / "v.json")).read_text()
    parsed = _parse(page)
    text = " ".join(" ".join(parsed.text).split())
    assert {"summary", "manual", "fixable", "diffs", "failed", "validation", "divergence", "verdicts"} <= parsed.ids
    assert "Manual actions (1)" in text and "apex" in text  # with its guidance and effort
    assert "Fixable (check --fix, unsafe ones with --unsafe-fixes) (1)" in text and "CN205" in text
    assert '- model = Net().cuda()' in text and '+ model = Net().to("neuron")' in text
    # the edited line carries the rule code that wrote it
    assert re.search(r'<tr class="del"><td class=n>2</td>.*?<span class="badge rule">CN101</span>', page)
    assert "broken.py:2" in text and "parse" in text
    assert "Verdict: FAIL" in text and "grad:net.fc.weight" in text and "first tensor that fails" in text
    assert "model.py:3-9" in text and "CN301" in text


@pytest.mark.parametrize(
    "needle",
    [
        pytest.param(re.compile(r"""src\s*=\s*["']?(https?:)?//""", re.I), id="no-remote-src"),
        # the one remote address: links a reader may follow to a rule's public entry (never loaded)
        pytest.param(re.compile(r"""<(?!a\s)[^>]*href\s*=\s*["']?(https?:)?//""", re.I), id="no-remote-href-but-rule-links"),
        pytest.param(re.compile(r"<link\b", re.I), id="no-stylesheet-link"),
        pytest.param(re.compile(r"<script\s+src", re.I), id="no-external-script"),
    ],
)
def test_page_is_self_contained(tmp_path, needle):
    page = _migrate_page(tmp_path, main).read_text()
    assert not needle.search(page)
    assert "default-src 'none'" in page  # and the browser would refuse any fetch


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{", "not JSON", id="not-json"),
        pytest.param('{"summary": {}}', "not a validate report", id="a-migrate-report"),
        pytest.param("[]", "not a validate report", id="a-list"),
    ],
)
def test_bad_validate_report_is_an_error(text, message):
    with pytest.raises(ValidationReportError, match=f"v.json: {message}"):
        load_validation(text, "v.json")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--validate-report", "v.json"], "add --report FILE.html", id="without-html"),
        pytest.param(["--report", "r.html", "--validate-report", "missing.json"], "missing.json: cannot read", id="missing"),
        pytest.param(["--report", "r.html", "--validate-report", "bad.json"], "bad.json: not JSON", id="bad"),
    ],
)
def test_migrate_validate_report_errors(tmp_path, run_cli, args, message):
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "v.json").write_text(VALIDATION)
    (tmp_path / "a.py").write_text("x = y.cuda()\n")
    code, _, err = run_cli("migrate", "--diff", "a.py", *args, cwd=tmp_path)
    assert code == 2 and message in err


def _chart_result(n: int = 6) -> dict:
    """A validate report with a logic and a precision check: the logic one FAILs from the 4th tensor on."""
    rows = []
    for i in range(n):
        for check in ("logic", "precision"):
            bad = check == "logic" and i >= 3
            rows.append(TensorComparison(
                key=("logic/" if check == "logic" else "") + f"s{i // 3}/fwd/0:blocks.{i % 3}#0", kind="forward",
                step=i // 3, module_path=f"0:blocks.{i % 3}", module_class="Block", shape_ref=(2,), shape_port=(2,),
                dtype_ref="float32", dtype_port="float32", device_ref="cpu", device_port="neuron", max_abs=0.1,
                max_rel=0.1, cosine=0.99, ref_error=1e-6, port_error=0.3 if bad else 1e-6, allowed=8e-5,
                nonfinite_mismatch=0, verdict=Verdict.FAIL if bad else Verdict.PASS, reason="r", check=check,
                judged=not (check == "precision" and i == 0)))
    return json.loads(validation_json(ValidationResult(
        verdict=Verdict.FAIL, mode="script", target="train.py", original="/o", port="/p", golden_used=True,
        comparisons=tuple(rows))))


def test_validation_chart_plots_error_against_the_bound():
    page = to_html(None, _chart_result())
    charts = re.findall(r'<svg class="chart".*?</svg>', page, re.S)
    assert len(charts) == 2 and "logic check" in page and "precision check" in page  # one per check
    logic, precision = charts
    bound = float(re.search(r'<line class="bound"[^>]*y1="([\d.]+)"', logic).group(1))
    fail_line = float(re.search(r'<line class="failline"[^>]*y1="([\d.]+)"', logic).group(1))
    points = re.findall(r'<circle class="pt (\w+)" cx="([\d.]+)" cy="([\d.]+)"', logic)
    assert [v for v, _, _ in points] == ["PASS"] * 3 + ["FAIL"] * 3
    # forward order left to right; PASS under the bound, the FAILs above the line where FAIL starts
    assert [float(x) for _, x, _ in points] == sorted(float(x) for _, x, _ in points)
    assert all(float(y) > bound for v, _, y in points if v == "PASS")
    assert all(float(y) < fail_line for v, _, y in points if v == "FAIL")
    assert "step 0" in logic and "step 1" in logic
    assert precision.count('class="pt unjudged"') == 1  # not judged: drawn hollow
    assert "logic/s1/fwd/0:blocks.0#0: error 3.00e-01 / allowed 8.00e-05" in logic  # the tooltip
    text = " ".join(" ".join(_parse(page).text).split())
    assert "logic FAIL" in text and "precision PASS" in text


def test_validate_only_page():
    page = to_html(None, json.loads(VALIDATION))
    text = " ".join(" ".join(_parse(page).text).split())
    assert "cuda2neuron validate report" in text and "Verdict: FAIL" in text
    assert "Summary" not in text  # no migrate run given


# -- in the browser -------------------------------------------------------------------------


def _load(page: Path, tmp_path: Path, fragment: str = "") -> tuple[str, list[str]]:
    """The DOM after the page's scripts ran, and every console message the page logged."""
    proc = subprocess.run(
        [
            BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=2000", "--dump-dom", page.resolve().as_uri() + fragment,
        ],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Chromium logs each console message (console.*, uncaught errors, CSP refusals) as CONSOLE.
    console = [line for line in proc.stderr.splitlines() if re.search(r"CONSOLE[(:]", line)]
    return proc.stdout, console


@needs_browser
@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param("<script>undefinedFunction()</script>", "ReferenceError", id="script-error"),
        pytest.param("<script>console.error('boom')</script>", "boom", id="console-error"),
        pytest.param('<img src="https://example.invalid/x.png">', "Content Security Policy", id="network-fetch"),
    ],
)
def test_browser_harness_sees_console_errors(tmp_path, body, expected):
    # The harness can fail: a broken page, and one that tries to fetch, are caught.
    page = tmp_path / "bad.html"
    csp = """<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'">"""
    page.write_text(f"<!DOCTYPE html><html><head>{csp}</head><body>{body}</body></html>")
    _, console = _load(page, tmp_path)
    assert any(expected in line for line in console), console


@needs_browser
@pytest.mark.slow
def test_report_in_the_browser(tmp_path):
    (tmp_path / "v.json").write_text(VALIDATION)
    page = _migrate_page(tmp_path, main, "--validate-report", str(tmp_path / "v.json"))
    dom, console = _load(page, tmp_path)
    assert console == []
    parsed = _parse(dom)
    text = " ".join(" ".join(parsed.text).split())
    assert 'data-ready="1"' in dom  # the script ran to its end
    total = re.search(r"(\d+) of (\d+) items shown", text)
    assert total and total.group(1) == total.group(2) and int(total.group(2)) > 5
    assert "Verdict: FAIL" in text and "First divergence" in text and "Manual actions (1)" in text
    assert '+ model = Net().to("neuron")' in text
    # the chart of errors against their bounds is drawn: every point has a box on the page
    drawn = re.search(r'<svg class="chart"[^>]*data-drawn="(\d+)"', dom)
    assert drawn and int(drawn.group(1)) == len(json.loads(VALIDATION)["comparisons"]) > 0

    # two checks, two charts, every point drawn
    chart_page = tmp_path / "chart.html"
    chart_page.write_text(to_html(None, _chart_result(40)))
    dom, console = _load(chart_page, tmp_path)
    assert console == []
    assert re.findall(r'<svg class="chart"[^>]*data-drawn="(\d+)"', dom) == ["40", "40"]

    # the filter in the link hides every item that does not mention the rule
    filtered, console = _load(page, tmp_path, "#q=CN606")
    assert console == []
    shown = re.search(r"(\d+) of (\d+) items shown", " ".join(_parse(filtered).text))
    assert shown and 0 < int(shown.group(1)) < int(shown.group(2))
    assert _parse(filtered).hidden_rows == int(shown.group(2)) - int(shown.group(1))


def test_long_paths_wrap_and_rule_links_are_public(tmp_path):
    # issue 43: a 149-character path kept the table from wrapping; rule links were file:// paths.
    from cuda2neuron.core import FileResult, FileStatus, Finding, Span
    from cuda2neuron.report import build_report, render, rule_help_uri

    deep = "/".join(["a_rather_long_folder_name"] * 5) + "/train.py"
    finding = Finding("CN606", "apex", "apex is CUDA-only", deep, Span(3, 0, 3, 11))
    page = render(build_report("migrate", "neuron", [FileResult(deep, FileStatus.UNCHANGED, findings=(finding,))]),
                  "html")
    assert len(deep) > 130 and "a_rather_long_folder_name/<wbr>a_rather_long_folder_name/<wbr>" in page
    assert "td.mono{overflow-wrap:anywhere" in page
    links = re.findall(r'<a href="([^"#]+)', page)
    assert links and all(link.startswith("https://") and rule_help_uri("CN606").startswith(link) for link in links)
