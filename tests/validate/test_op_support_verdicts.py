"""validate and TorchNeuron's op-support classes (backend/op_support.toml): an N op is an ERROR
naming the op and the port line; a CPU_FALLBACK op passes and is listed as host work on Trainium."""

from __future__ import annotations

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._report import residency_line, to_markdown

from validate_helpers import PORT_DEVICE, copy_with_patches

pytestmark = pytest.mark.skipif(PORT_DEVICE != "neuron", reason="needs the emulated neuron device")

FORWARD = "        return x + self.drop(F.gelu(self.norm(self.fc(x)))) * scale"


def _validate(original, port):
    return run_validation(ValidateRequest(original=original, port=port, port_device=PORT_DEVICE, mode="entry",
                                          entry="entry:build", golden=False))


def test_an_n_op_is_an_error_naming_the_op_and_the_line(mlp, tmp_path):
    # Quantized operator variants are N on AWS's supported-operators page (the shipped table).
    port = copy_with_patches(mlp / "port", tmp_path / "port", (
        ("model.py", FORWARD, "        q = torch.quantize_per_tensor(x.detach(), 0.1, 0, torch.qint8)\n" + FORWARD),))
    if "import torch\n" not in (port / "model.py").read_text():
        (port / "model.py").write_text("import torch\n" + (port / "model.py").read_text())
    r = _validate(mlp / "original", port)
    assert r.verdict is Verdict.ERROR and r.exit_code == 2, (r.verdict, r.failures)
    [failure] = [f for f in r.failures if f.role == "port"]
    line = next(i for i, t in enumerate((port / "model.py").read_text().splitlines(), 1) if "quantize_per_tensor" in t)
    assert "aten::quantize_per_tensor is not supported on Trainium" in failure.message
    assert failure.location == f"model.py:{line}", failure


# The port asks torch_neuronx what fell back and what executed, as ported code does on Trainium.
CHECKS_ITS_OPS = """\
        out = x + self.drop(F.gelu(self.norm(self.fc(x)))) * scale
        import torch_neuronx
        assert torch_neuronx.get_fallback_ops() == ["aten::gelu"], torch_neuronx.get_fallback_ops()
        executed = torch_neuronx.get_executed_ops()
        assert "aten::linear" in executed and "aten::gelu" not in executed, executed
        return out"""


def test_a_cpu_fallback_op_passes_and_is_listed_as_host_work(mlp, tmp_path, monkeypatch):
    # A table of the real format with one CPU_FALLBACK row: loading another table is a data change.
    table = tmp_path / "op_support.toml"
    table.write_text('[op."aten::gelu"]\nstatus = "CPU_FALLBACK"\nsource = "test table"\n')
    monkeypatch.setenv("CUDA2NEURON_OP_SUPPORT", str(table))
    port = copy_with_patches(mlp / "port", tmp_path / "port", (("model.py", FORWARD, CHECKS_ITS_OPS),))
    r = _validate(mlp / "original", port)
    assert r.verdict is Verdict.PASS, (r.verdict, r.failures)
    assert r.audit is not None and r.audit.available
    [gelu] = r.audit.fallback_ops
    assert gelu.op == "aten::gelu" and gelu.count >= 1 and any("model.py:" in loc for loc in gelu.locations)
    assert "would run on the host on Trainium (aten::gelu: CPU_FALLBACK)" in residency_line(r.audit)
    assert "would run on the host on Trainium (CPU_FALLBACK): `aten::gelu`" in to_markdown(r)
