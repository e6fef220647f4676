"""TorchNeuron's op-support classes on the emulated device (backend/op_support.toml), the
torch_neuronx op-tracking surface, and torch.compile(dynamic=True) rejected as on Trainium."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from cuda2neuron.backend import _torch_neuronx, install_torch_neuronx, op_support, real_torch_neuronx
from cuda2neuron.backend.accounting import OpAccounting
from cuda2neuron.backend._compile import NeuronDynamicUnsupported


def test_shipped_rows_carry_their_source():
    rows = op_support.load_table()
    assert {r.status for r in rows} <= {"N", "CPU_FALLBACK"} and all(r.source for r in rows)
    assert ("aten::quantize_per_tensor", "N") in {(r.op, r.status) for r in rows}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param('[op."aten::gelu"]\nstatus = "Y"\nsource = "x"\n', "status must be one of", id="bad-status"),
        pytest.param('[op."aten::gelu"]\nstatus = "N"\n', "needs its source", id="no-source"),
        pytest.param('[op."gelu"]\nstatus = "N"\nsource = "x"\n', "aten op name", id="not-aten"),
        pytest.param('[op."aten::gelu"]\nstatus = "N"\nsource = "x"\ndtypes = 1\n', "unknown key", id="unknown-key"),
        pytest.param("[op\n", "cannot read", id="bad-toml"),
    ],
)
def test_a_malformed_table_names_the_file_and_row(tmp_path, text, message):
    path = tmp_path / "table.toml"
    path.write_text(text)
    with pytest.raises(op_support.OpSupportError, match=message) as exc:
        op_support.load_table(path)
    assert str(path) in str(exc.value)


def test_an_n_op_fails_on_the_device_naming_it():
    x = torch.randn(4, device="neuron")
    with pytest.raises(NotImplementedError, match=r"aten::quantize_per_tensor is not supported on Trainium .*test_op_support\.py:\d+"):
        torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    torch.quantize_per_tensor(x.cpu(), 0.1, 0, torch.qint8)  # on the host it runs, as on Trainium


def test_a_cpu_fallback_op_runs_on_the_host_and_is_tracked():
    # The shipped table's CPU_FALLBACK kernel applied to a stand-in op: same values as CPU,
    # device result, the op and the line recorded (what torch_neuronx.get_fallback_ops() reads).
    row = op_support.OpSupport("aten::cumsum", "CPU_FALLBACK", "test")
    kernel = op_support._host_fallback(row, torch.ops.aten.cumsum.default)
    op_support.clear()
    x = torch.arange(6.0).to("neuron")
    out = kernel(x, 0)
    assert out.device.type == "neuron" and torch.equal(out.cpu(), torch.arange(6.0).cumsum(0))
    target = torch.zeros(6, device="neuron")
    out_kernel = op_support._host_fallback(row, torch.ops.aten.cumsum.out)
    assert out_kernel(x, 0, out=target) is target and torch.equal(target.cpu(), torch.arange(6.0).cumsum(0))
    count, where = op_support.fallback_ops()["aten::cumsum"]
    assert count == 2 and all("test_op_support.py:" in w for w in where)


@pytest.fixture
def neuronx(monkeypatch):
    """The emulated torch_neuronx, its op tracking turned off afterwards (it costs every later test
    the accounting's callback otherwise)."""
    monkeypatch.delitem(sys.modules, "torch_neuronx", raising=False)  # put back as it was afterwards
    module = install_torch_neuronx()
    yield module
    _torch_neuronx.uninstall()


def test_torch_neuronx_surface_reports_fallbacks_and_is_not_the_real_one(neuronx):
    module = neuronx
    assert importlib.import_module("torch_neuronx") is module and not real_torch_neuronx()
    module.clear_op_tracking()
    op_support._record("aten::_scaled_mm")
    assert module.get_fallback_ops() == ["aten::_scaled_mm"]
    module.clear_op_tracking()
    assert module.get_fallback_ops() == []
    assert "aten::_scaled_mm" in op_support.fallback_ops(since_clear=False)  # validate's audit keeps it


def test_get_executed_ops_names_the_device_ops_since_the_last_clear(neuronx):
    # torch-neuronx's shape: a list of distinct op names. CPU ops are not listed, nor an op of the
    # op-support table (an N op fails on Trainium; a CPU_FALLBACK one runs on the host).
    x = torch.randn(4, device="neuron")
    neuronx.clear_op_tracking()
    assert neuronx.get_executed_ops() == []
    y = x * 2
    y = y * 3
    torch.ones(3).add(1)
    with pytest.raises(NotImplementedError):
        torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    assert neuronx.get_executed_ops() == ["aten::mul"]
    assert _torch_neuronx.executed_op_counts() == {"aten::mul": 2}
    neuronx.clear_op_tracking()
    assert neuronx.get_executed_ops() == []


def test_op_tracking_and_the_accounting_count_apart(neuronx):
    # validate's accounting starts (and resets) at the port's first step and pauses around its own
    # host copies; the port clears its tracking whenever it likes: neither resets the other.
    x = torch.randn(4, device="neuron")
    neuronx.clear_op_tracking()
    x.exp()
    with OpAccounting() as acc:
        x.add(1)
        neuronx.clear_op_tracking()
        x.add(2)
        with acc.paused():
            x.cpu()  # the caller's own copy: in neither
    assert neuronx.get_executed_ops() == ["aten::add"]
    assert [(o.op, o.count, o.elements) for o in acc.report().device_op_details] == [("aten::add", 2, 8)]  # elements summed
    # an accounting that ends inside paused() hands the tracking back on
    acc = OpAccounting()
    acc.__enter__()
    with acc.paused():
        acc.__exit__(None, None, None)
    x.exp()
    assert "aten::exp" in neuronx.get_executed_ops()


def test_compile_dynamic_true_is_rejected_as_trainium_rejects_it():
    torch._dynamo.reset()
    model = torch.nn.Linear(4, 2).to("neuron")
    with pytest.raises(Exception, match="dynamic=True") as exc:
        torch.compile(model, backend="neuron", dynamic=True)(torch.randn(3, 4, device="neuron"))
    assert isinstance(exc.value, NeuronDynamicUnsupported) or "NeuronDynamicUnsupported" in str(exc.value)
    torch._dynamo.reset()
    out = torch.compile(model, backend="neuron", dynamic=False)(torch.randn(3, 4, device="neuron"))
    assert out.shape == (3, 2)
