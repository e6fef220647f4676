"""A verdict needs a compared optimizer step (issue 40): fp16 training skips its first steps
while the GradScaler's scale overflows, and a run that counted those steps compared no gradient,
moved no parameter and PASSed a detached module. validate steps on until it has compared the
``--steps`` steps taken (at most SKIPPED_STEPS_CAP skipped ones more); a run that still compared
none is a WARN that says which steps the original skipped and at what scale."""

from __future__ import annotations

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._worker_config import SKIPPED_STEPS_CAP
from validate_helpers import PORT_DEVICE, PROJECTS, assert_correct_port, assert_no_emulator_gap, copy_with_patches, needs_emulator

pytestmark = [pytest.mark.slow, needs_emulator]

ORIGINAL = PROJECTS / "amp_vit" / "original"
PORT = PROJECTS / "amp_vit" / "port"
# The fp16 original overflows at 5e5 and skips its first two optimizer steps.
TWO_SKIPPED = ("--scaler", "amp", "--init-scale", "5e5")
DETACH = ("model.py", "        return self.proj(x.transpose(1, 2).reshape(b, n, c))\n",
          "        return self.proj(x.transpose(1, 2).reshape(b, n, c)).detach()\n")


def _run(port, *args: str, steps: int):
    return run_validation(ValidateRequest(original=ORIGINAL, port=port, port_device=PORT_DEVICE, mode="script",
                                          script="train.py", args=args, steps=steps))


def test_skipped_steps_are_made_up_until_the_requested_steps_are_compared():
    r = _run(PORT, *TWO_SKIPPED, steps=2)
    assert_no_emulator_gap(r)
    assert_correct_port(r)
    note = next(n for n in r.notes if "GradScaler skipped" in n)
    skipped = {int(s) for s in note.split("step(s) ")[1].split(" (")[0].split(", ")}
    grad_steps = {c.step for c in r.comparisons if c.kind == "grad" and c.check != "logic"}
    assert {0, 1} <= skipped and len(grad_steps) == 2 and not grad_steps & skipped, (grad_steps, note)
    assert "compare 2 steps taken" in note, note
    assert any("logic check compared" in n and "every step taken (2)" in n for n in r.notes), r.notes


def test_a_detached_module_behind_skipped_steps_fails(tmp_path):
    """Counted from the start, both steps were skipped ones: no gradient compared, the forward
    the same, and the detached attention PASSed."""
    port = copy_with_patches(PORT, tmp_path / "port", (DETACH,))
    r = _run(port, *TWO_SKIPPED, steps=2)
    assert_no_emulator_gap(r)
    assert r.verdict is Verdict.FAIL and r.exit_code == 1, (r.verdict, r.counts(), r.notes)
    assert r.divergence is not None and (r.divergence.module_path or "").startswith("0:blocks."), r.divergence


def test_a_run_that_compared_no_step_is_never_a_pass():
    """A scale no number of halvings within the cap brings under fp16's range."""
    r = _run(PORT, "--scaler", "amp", "--init-scale", "1e30", "--steps", "100", steps=1)
    assert_no_emulator_gap(r)
    assert not [c for c in r.comparisons if c.kind == "grad"]
    assert r.verdict is Verdict.WARN and not r.failures, (r.verdict, r.failures)
    last = SKIPPED_STEPS_CAP  # steps 0..steps+cap-1, all skipped
    assert r.notes[0].startswith(f"no optimizer step was compared: the reference skipped steps 0–{last} (inf/NaN "
                                 "at scale 1e+30 down to "), r.notes
    assert any(f"stopped after {last + 1} skipped steps" in n for n in r.notes), r.notes
