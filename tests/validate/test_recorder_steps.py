"""When a run has recorded all its steps (Recorder.done): ``steps``, or — the logic pair —
``taken_steps`` that the original did not skip, skipped ones made up to SKIPPED_STEPS_CAP."""

from __future__ import annotations

import pytest

from cuda2neuron.validate._recorder import Recorder
from cuda2neuron.validate._worker_config import SKIPPED_STEPS_CAP

# (id, steps, taken_steps, step reached, steps the original skipped, done)
CASES = [
    ("all-steps-not-yet", 3, None, 2, [], False),
    ("all-steps-reached", 3, None, 3, [], True),
    ("skips-do-not-end-a-full-run-early", 3, None, 2, [0, 1], False),
    ("logic-two-taken", 3, 2, 2, [], True),
    ("logic-one-taken-so-far", 3, 2, 1, [], False),
    ("logic-skipped-steps-do-not-count", 4, 2, 2, [0, 1], False),
    ("logic-two-taken-after-two-skipped", 4, 2, 4, [0, 1], True),
    ("logic-one-skipped-one-taken", 4, 2, 2, [0], False),
    ("skipped-steps-are-made-up", 3, None, 3, [0, 1], False),
    ("made-up-steps-end-at-the-requested-taken", 3, None, 5, [0, 1], True),
    ("logic-made-up-too", 3, 2, 3, [0, 1], False),
    ("the-run-ends-at-the-cap-whatever-was-taken", 3, None, 3 + SKIPPED_STEPS_CAP, list(range(3 + SKIPPED_STEPS_CAP)),
     True),
]


@pytest.mark.parametrize(("steps", "taken", "step", "skipped", "done"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_done(steps, taken, step, skipped, done):
    recorder = Recorder(lambda frame: None, lambda: None, "logic-port", steps, ".", stop_after_steps=True,
                        taken_steps=taken)
    recorder.step, recorder.skipped_steps = step, list(skipped)
    assert recorder.done() is done
