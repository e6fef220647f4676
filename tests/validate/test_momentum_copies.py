"""Weights without a gradient of their own (issue 40): a momentum encoder / EMA copy of the model
(`requires_grad=False`, updated as ``m*k + (1-m)*q``) is judged with the noise masks of the
parameter it was copied from, and a copy no forward ever ran (an EMA kept for evaluation only)
is listed as not exercised instead of passing unseen. Fixture: tests/fixtures/projects/amp_vit
(`entry:build_momentum_step`, `train.py --ema M --ema-eval-only`)."""

from __future__ import annotations

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._report import verdict_line
from validate_helpers import PORT_DEVICE, PROJECTS, assert_correct_port, assert_no_emulator_gap, needs_emulator

pytestmark = [pytest.mark.slow, needs_emulator]

ORIGINAL = PROJECTS / "amp_vit" / "original"
PORT = PROJECTS / "amp_vit" / "port"


def _run(**kw):
    return run_validation(ValidateRequest(original=ORIGINAL, port=PORT, port_device=PORT_DEVICE, **kw))


def test_a_momentum_copy_is_judged_with_its_sources_noise_masks():
    """The copy's zero-initialised key biases move by (1-m) times its source's noise-level Adam
    updates: compared in full they are as loose as noise allows; with the source's mask, the
    same elements are left out of both."""
    r = _run(mode="entry", entry="entry:build_momentum_step", steps=2)
    assert_no_emulator_gap(r)
    assert_correct_port(r)
    finals = {c.key: c for c in r.comparisons if c.kind == "param" and c.key.endswith("blocks.0.attn.qkv.bias")}
    roots = {key.split("/param/")[1].split(":")[0] for key in finals}
    assert len(roots) == 2, sorted(finals)  # the model and its momentum copy
    for key, c in finals.items():
        assert "left out: their gradients were rounding noise" in c.reason, (key, c.reason)


def test_an_ema_used_only_for_evaluation_is_listed_as_not_exercised():
    r = _run(mode="script", script="train.py", args=("--zero-bias", "--ema", "0.99", "--ema-eval-only", "--steps", "4"),
             steps=2)
    assert_no_emulator_gap(r)
    assert r.not_exercised == ("ema (ViT, 44 parameters, 0 buffers)",), r.not_exercised
    assert "not_exercised=1" in verdict_line(r)
    assert any(n.startswith("1 module(s) with weights were not exercised") for n in r.notes), r.notes


def test_an_ema_the_run_evaluates_is_exercised():
    """The script's own --steps end the run after its evaluation: the EMA ran a forward."""
    r = _run(mode="script", script="train.py", args=("--zero-bias", "--ema", "0.99", "--ema-eval-only", "--steps", "2"),
             steps=2)
    assert_no_emulator_gap(r)
    assert r.verdict is Verdict.PASS and r.not_exercised == (), (r.verdict, r.not_exercised)
    assert any(c.kind == "forward" and c.module_path and c.module_path.startswith("1:") for c in r.comparisons)
