"""Op accounting: device vs CPU ops, elements, float64/complex, CPU op source locations."""

from __future__ import annotations

import warnings

import pytest
import torch

from cuda2neuron.backend.accounting import AccountingReport, CpuOp, OpAccounting


def test_counts_device_and_cpu_ops():
    a = torch.randn(10, 10, device="neuron")
    c = torch.randn(10, 10)
    with OpAccounting() as acc:
        a + a  # device op
        torch.mm(a, a)  # device op
        c * 2  # left on the CPU
    rep = acc.report()
    assert isinstance(rep, AccountingReport)
    assert rep.device_ops == 2 and rep.device_elements == 200
    assert rep.cpu_ops == 1 and rep.cpu_elements == 100
    (mul,) = rep.cpu_op_details
    assert isinstance(mul, CpuOp) and mul.op == "aten::mul" and mul.count == 1 and mul.elements == 100
    assert len(mul.locations) == 1
    assert mul.locations[0].endswith(f"test_accounting.py:{_line_of('c * 2  # left on the CPU')}")


def _line_of(text: str) -> int:
    with open(__file__) as f:
        for number, line in enumerate(f, start=1):
            if text in line and "_line_of" not in line:
                return number
    raise AssertionError(text)


def test_cpu_op_locations_are_distinct_and_capped():
    c = torch.randn(4)
    with OpAccounting() as acc:
        for _ in range(50):
            c.exp()
        c.exp()
    (op,) = [o for o in acc.report().cpu_op_details if o.op == "aten::exp"]
    assert op.count == 51
    assert 1 <= len(op.locations) <= 4 and len(set(op.locations)) == len(op.locations)


def test_off_by_default_and_after_exit():
    with OpAccounting() as acc:
        pass
    torch.randn(3) + 1
    assert acc.report().cpu_ops == 0


def test_float64_and_complex_ops_are_counted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpAccounting() as acc:
            torch.zeros(3, dtype=torch.float64, device="neuron")
            z = torch.ones(2, dtype=torch.complex64, device="neuron")
            z * z
    rep = acc.report()
    assert rep.float64_ops >= 1 and rep.complex_ops >= 1


def test_float64_and_complex_ops_name_their_lines():
    """Issue 40: a float64 count alone named no line to fix."""
    schedule = torch.linspace(1e-4, 0.02, 10, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with OpAccounting() as acc:
            schedule.to("neuron")
            torch.ones(2, dtype=torch.complex64, device="neuron")
    rep = acc.report()
    here = f"{__file__}:"
    assert [op.op for op in rep.float64_op_details] == ["aten::to"], rep
    assert rep.float64_op_details[0].locations[0].startswith(here), rep
    assert rep.complex_op_details and rep.complex_op_details[0].locations[0].startswith(here), rep
    assert sum(op.count for op in rep.float64_op_details) == rep.float64_ops


def test_backward_ops_are_device_ops():
    w = torch.randn(4, 4, device="neuron", requires_grad=True)
    with OpAccounting() as acc:
        loss = (w @ w).sum()
        forward = acc.report()
        loss.backward()
    rep = acc.report()
    assert rep.cpu_ops == 0
    # the backward of the matmul is two more matmuls, run by autograd on its device thread
    assert rep.device_ops >= forward.device_ops + 2


@pytest.mark.parametrize("device", ["cpu", "neuron"], ids=["cpu-graph-on-calling-thread", "device-graph"])
def test_ops_autograd_runs_in_backward_are_counted(device):
    # autograd wraps each backward node in a record that is a label, not an op: it once hid
    # every op of backward from the audit (a log_softmax moved to the host counted half).
    x = torch.randn(4, 5, device=device, requires_grad=True)
    with OpAccounting() as acc:
        loss = torch.log_softmax(x, 1).sum()
        forward = acc.report()
        loss.backward()
    rep = acc.report()
    if device == "cpu":
        assert "aten::_log_softmax_backward_data" in {o.op for o in rep.cpu_op_details}
        assert rep.cpu_ops > forward.cpu_ops and rep.device_ops == 0
    else:
        assert rep.device_ops > forward.device_ops + 1 and rep.cpu_ops == 0


def test_host_op_in_a_device_graph_is_counted_in_both_directions():
    x = torch.randn(4, 5, device="neuron", requires_grad=True)
    with OpAccounting() as acc:
        torch.log_softmax(x.cpu(), 1).to("neuron").sum().backward()
    by_name = {o.op: o.count for o in acc.report().cpu_op_details}
    assert by_name.get("aten::log_softmax") == 1 and by_name.get("aten::_log_softmax_backward_data") == 1


def test_nesting_is_refused():
    with OpAccounting(), pytest.raises(RuntimeError, match="already active"):
        with OpAccounting():
            pass


def test_paused_leaves_the_block_out_and_keeps_the_counts():
    from cuda2neuron.backend import accounting

    a = torch.randn(10, device="neuron")
    c = torch.randn(10)
    with accounting.paused():  # no active accounting: a no-op
        c * 2
    with OpAccounting() as acc:
        a + a
        with accounting.paused():
            c * 2
            with acc.paused():  # nests
                a * 3
            a - a
        c + 1
    rep = acc.report()
    assert rep.device_ops == 1 and rep.cpu_ops == 1
    assert [o.op for o in rep.cpu_op_details] == ["aten::add"]


def test_skip_paths_report_the_callers_line(tmp_path):
    helper = tmp_path / "host_helper.py"
    helper.write_text("def double(t):\n    return t * 2\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("host_helper", helper)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with OpAccounting(skip_paths=[str(tmp_path)]) as acc:
        module.double(torch.randn(3))  # the CPU op is reported here
    (op,) = acc.report().cpu_op_details
    assert op.locations[0].endswith(f"test_accounting.py:{_line_of('the CPU op is reported here')}")


@pytest.mark.parametrize("build", [
    lambda: torch.nn.Linear(8, 16),
    lambda: torch.nn.Conv2d(3, 4, 3),
    lambda: torch.nn.BatchNorm1d(16),
    lambda: torch.nn.Embedding(10, 4),
    lambda: torch.nn.init.trunc_normal_(torch.nn.Parameter(torch.empty(4, 4)), std=0.02),
], ids=["linear", "conv", "batchnorm-running-stats", "embedding", "user-init-function"])
def test_validates_accounting_leaves_parameter_initialisation_out(build):
    """A module made lazily in a forward (BYOL's projector) is built, not computed: its host
    weight fills were a residency WARN on a correct port. Compute on the host still counts."""
    from cuda2neuron.validate import _accounting
    from cuda2neuron.validate._audit import _HOST_PIPELINE_OPS, _TRANSFER_OPS

    c = torch.ones(10, 10)
    assert _accounting.start()
    try:
        build()
        c * 2  # left on the CPU
    finally:
        rep = _accounting.finish()
    # Making a Parameter detaches its tensor, a buffer from a Python number is a transfer: ops the
    # audit's model-code rule never counts.
    counted = [o.op for o in rep.cpu_op_details if o.op not in _HOST_PIPELINE_OPS | _TRANSFER_OPS]
    assert counted == ["aten::mul"], rep.cpu_op_details
