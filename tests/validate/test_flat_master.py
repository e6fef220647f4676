"""Flat master weights (issue 40): trainers that flatten every parameter into one fp32 tensor
(apex O2-style `_flatten_dense_tensors`, `parameters_to_vector`) step an optimizer that holds
that one tensor. Its gradient was one record, normalised by the model's largest gradient: a
halved gradient in the first layer read as rounding and the run WARNed for something else. Each
parameter's segment is now its own record, named and located like any gradient."""

from __future__ import annotations

import textwrap

import pytest

from cuda2neuron.cli import main as cli_main
from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from validate_helpers import PORT_DEVICE, copy_with_patches, needs_emulator

pytestmark = [pytest.mark.slow, needs_emulator]

TRAIN = textwrap.dedent("""
    import torch
    import torch.nn as nn
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    FLATTEN = "{flatten}"


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 64, bias=False)
            self.fc2 = nn.Linear(64, 64)
            self.head = nn.Linear(64, 4)

        def forward(self, x):
            h = torch.relu(self.fc1(x))
            return self.head(torch.relu(self.fc2(h)))


    def flat(tensors):
        return _flatten_dense_tensors(tensors) if FLATTEN == "apex" else parameters_to_vector(tensors)


    torch.manual_seed(0)
    model = Net().cuda()
    params = list(model.parameters())
    master = nn.Parameter(flat([p.detach().float() for p in params]))  # one fp32 master tensor
    opt = torch.optim.SGD([master], lr=0.1)
    # small inputs: the first layer's gradients are ~1e-3 of the largest
    x, y = torch.randn(32, 16).cuda() * 1e-3, torch.randn(32, 4).cuda()
    for step in range(3):
        loss = ((model(x) - y) ** 2).mean()
        model.zero_grad()
        loss.backward()
        master.grad = flat([p.grad.float() for p in params])
        opt.step()
        with torch.no_grad():
            if FLATTEN == "apex":
                for p, m in zip(params, _unflatten_dense_tensors(master, params)):
                    p.copy_(m)
            else:
                vector_to_parameters(master, params)
""")
# The forward is unchanged; the first layer's gradient is halved.
HALVED = ("train.py", "        h = torch.relu(self.fc1(x))\n",
          "        z = self.fc1(x)\n        h = torch.relu(z - 0.5 * (z - z.detach()))\n")


def _pair(root, flatten: str):
    (root / "orig").mkdir()
    (root / "orig" / "train.py").write_text(TRAIN.replace("{flatten}", flatten))
    assert cli_main(["migrate", str(root / "orig"), "--out", str(root / "port"), "-q"]) == 0
    return root / "orig", root / "port"


def _validate(original, port):
    return run_validation(ValidateRequest(original=original, port=port, port_device=PORT_DEVICE, mode="script",
                                          script="train.py"))


@pytest.mark.parametrize("flatten", ["apex", "parameters_to_vector"])
def test_a_flat_master_gradient_is_compared_per_parameter(tmp_path, flatten):
    original, port = _pair(tmp_path, flatten)
    r = _validate(original, port)
    assert r.verdict is Verdict.PASS, (r.failures, [(c.key, c.reason) for c in r.comparisons if c.verdict is not Verdict.PASS][:3])
    grads = {c.key for c in r.comparisons if c.kind == "grad" and c.step == 0}
    assert grads == {"s0/grad/0:fc1.weight", "s0/grad/0:fc2.weight", "s0/grad/0:fc2.bias", "s0/grad/0:head.weight",
                     "s0/grad/0:head.bias"}, grads


def test_a_wrong_gradient_in_one_layer_of_a_flat_master_fails_there(tmp_path):
    original, port = _pair(tmp_path, "apex")
    bad = copy_with_patches(port, tmp_path / "bad", (HALVED,))
    r = _validate(original, bad)
    assert r.verdict is Verdict.FAIL and r.exit_code == 1, r.counts()
    d = r.divergence
    assert d is not None and d.key == "s0/grad/0:fc1.weight", d
