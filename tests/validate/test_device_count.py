"""One device count in both worlds (issue 40): the shim said 1 and the emulator 2, so code that
sizes its batch (or wraps its model) by the device count ran a different program in the port.
validate gives every run ``CUDA2NEURON_DEVICE_COUNT`` (1 per local rank, or the user's own)."""

from __future__ import annotations

import textwrap

import pytest

from cuda2neuron.cli import main as cli_main
from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from validate_helpers import PORT_DEVICE, needs_emulator

pytestmark = [pytest.mark.slow, needs_emulator]

TRAIN = textwrap.dedent("""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    n = torch.cuda.device_count()
    model = nn.Linear(4, 2).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8 * n, 4).cuda()  # eight samples per device
    for step in range(2):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
""")


def test_a_batch_sized_by_the_device_count_is_the_same_in_both_runs(tmp_path):
    (tmp_path / "orig").mkdir()
    (tmp_path / "orig" / "train.py").write_text(TRAIN)
    assert cli_main(["migrate", str(tmp_path / "orig"), "--out", str(tmp_path / "port"), "-q"]) == 0
    assert "torch.neuron.device_count()" in (tmp_path / "port" / "train.py").read_text()
    r = run_validation(ValidateRequest(original=tmp_path / "orig", port=tmp_path / "port", port_device=PORT_DEVICE,
                                       mode="script", script="train.py", steps=2))
    assert r.verdict is Verdict.PASS, (r.failures, [(c.key, c.reason) for c in r.comparisons if c.verdict is not Verdict.PASS][:3])
