"""The residency audit names the user lines of the float64 ops it counts (issue 40): a count
alone ("52 float64 ops") sent the user searching a whole port for a schedule array indexed on
the device."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._report import to_markdown

from validate_helpers import PORT_DEVICE, PROJECTS, copy_with_patches

# The port is the one migrate wrote before CN805 (float64-indexed-on-device): the device strings
# only, the schedule line as in the original.
PAIR = PROJECTS / "float64_schedule"
# model.py's `torch.from_numpy(arr).to(device=t.device)[t].float()`: the float64 array reaches the device here.
SCHEDULE_LINE = next(i for i, text in enumerate((PAIR / "port" / "model.py").read_text().splitlines(), 1)
                     if "from_numpy(arr).to(device=t.device)" in text)


@pytest.fixture(scope="module")
def result():
    if PORT_DEVICE != "neuron":
        pytest.skip("needs the emulated neuron device (op accounting)")
    return run_validation(ValidateRequest(original=PAIR / "original", port=PAIR / "port", mode="entry",
                                          entry="entry:build", port_device=PORT_DEVICE))


def test_the_float64_finding_names_the_schedule_line(result):
    audit = result.audit
    assert audit is not None and audit.available and audit.verdict is Verdict.WARN, audit
    [finding] = [r for r in audit.reasons if "float64" in r]
    assert f"model.py:{SCHEDULE_LINE}" in finding, finding
    assert any(f"model.py:{SCHEDULE_LINE}" in loc for op in audit.float64_op_details for loc in op.locations)


def test_the_report_lists_the_float64_ops_with_their_lines(result):
    text = to_markdown(result)
    assert any(line.startswith("- float64 on the device:") and f"model.py:{SCHEDULE_LINE}" in line
               for line in text.splitlines()), text


def test_casting_on_the_host_first_clears_the_finding(tmp_path):
    """The fix the docs give: `.float()` before the transfer (indexing selects values, so the
    cast commutes with it) leaves no float64 op on the device and the same values."""
    if PORT_DEVICE != "neuron":
        pytest.skip("needs the emulated neuron device (op accounting)")
    port = copy_with_patches(PAIR / "port", tmp_path / "port", (
        ("model.py", "torch.from_numpy(arr).to(device=t.device)[t].float()",
         "torch.from_numpy(arr).float().to(device=t.device)[t]"),
    ))
    r = run_validation(ValidateRequest(original=PAIR / "original", port=port, mode="entry", entry="entry:build",
                                       port_device=PORT_DEVICE))
    assert r.audit is not None and r.audit.float64_ops == 0 and not r.audit.float64_op_details, r.audit
    assert r.verdict is Verdict.PASS, (r.verdict, r.audit.reasons)


def test_migrate_casts_on_the_host_and_the_port_passes(tmp_path):
    """CN805's safe fix is what `migrate` writes now: its port has no float64 op left."""
    if PORT_DEVICE != "neuron":
        pytest.skip("needs the emulated neuron device (op accounting)")
    port = tmp_path / "port"
    subprocess.run([sys.executable, "-m", "cuda2neuron", "migrate", str(PAIR / "original"), "--out", str(port)],
                   check=True, capture_output=True)
    assert "torch.from_numpy(arr).float().to(device=t.device)[t]" in (port / "model.py").read_text()
    r = run_validation(ValidateRequest(original=PAIR / "original", port=port, mode="entry", entry="entry:build",
                                       port_device=PORT_DEVICE))
    assert r.audit is not None and r.audit.float64_ops == 0, r.audit
    assert r.verdict is Verdict.PASS, (r.verdict, r.audit.reasons)
