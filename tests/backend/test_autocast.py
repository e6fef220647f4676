"""torch.autocast("neuron") applies CUDA's op policy: lower precision / fp32 / promote."""

from __future__ import annotations

import pytest
import torch

LOWER = {
    "mm": lambda a, b: torch.mm(a, b),
    "matmul": lambda a, b: a @ b,
    "linear": lambda a, b: torch.nn.functional.linear(a, b),
    "addmm": lambda a, b: torch.addmm(a[:, :1].expand(4, 4).contiguous(), a, b),
    "conv2d": lambda a, b: torch.nn.functional.conv2d(a.view(1, 1, 4, 4), b.view(1, 1, 4, 4)),
    "bmm": lambda a, b: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)),
}
FP32 = {
    "softmax": lambda a: torch.softmax(a, dim=-1),
    "log_softmax": lambda a: torch.log_softmax(a, dim=-1),
    "exp": lambda a: torch.exp(a),
    "layer_norm": lambda a: torch.nn.functional.layer_norm(a, (4,)),
    "mse_loss": lambda a: torch.nn.functional.mse_loss(a, a.detach() * 0),
    "sum": lambda a: a.sum(),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", list(LOWER))
def test_lower_precision_ops(name, dtype):
    a, b = torch.randn(4, 4, device="neuron"), torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron", dtype=dtype):
        out = LOWER[name](a, b)
    assert out.dtype == dtype and out.device.type == "neuron"


@pytest.mark.parametrize("name", list(FP32))
def test_fp32_ops(name):
    a = torch.randn(4, 4, device="neuron").to(torch.bfloat16)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = FP32[name](a)
    assert out.dtype == torch.float32


def test_promote_ops():
    a = torch.randn(4, device="neuron", dtype=torch.bfloat16)
    b = torch.randn(4, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.addcmul(b, a, b).dtype == torch.float32
        assert torch.atan2(a, b).dtype == torch.float32


def test_untouched_ops_and_disabled_region():
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.relu(a).dtype == torch.float32  # not in any list: runs in the input dtype
        with torch.autocast("neuron", enabled=False):
            assert (a @ a).dtype == torch.float32


def test_binary_cross_entropy_is_refused_like_cuda():
    p = torch.rand(4, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16), pytest.raises(RuntimeError, match="unsafe to autocast"):
        torch.nn.functional.binary_cross_entropy(p, p)


def test_autocast_training_matches_cpu_autocast_closely():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    dev = model.to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = dev(x.to("neuron"))
    assert out.dtype == torch.bfloat16
    model_cpu = model.to("cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = model_cpu(x)
    torch.testing.assert_close(out.float().cpu(), ref.float(), atol=2e-2, rtol=2e-2)
