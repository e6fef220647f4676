"""Text files (launch scripts, requirements, Dockerfiles, configs): findings are located in the
file as read, also when an edit before them on the line changed its length."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.core._text import _back
from cuda2neuron.workspace import fix_source

SCRIPT = "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_DEBUG=INFO python train.py --n $(nvidia-smi -L | wc -l)\n"


def _at(text: str, f) -> str:
    line = text.splitlines()[f.span.start_line - 1]
    return line[f.span.start_col : f.span.end_col]


def test_findings_after_a_shorter_edit_on_the_line():
    out, findings = fix_source(SCRIPT, "run.sh", Config())
    assert "NEURON_RT_VISIBLE_CORES=0-3" in out
    got = {f.code: _at(SCRIPT, f) for f in findings}
    assert got == {"CN701": "CUDA_VISIBLE_DEVICES=0,1,2,3", "CN704": "NCCL_DEBUG=INFO", "CN702": "nvidia-smi"}


@pytest.mark.parametrize(
    ("offset", "end", "expected"),
    [
        pytest.param(0, False, 0, id="before"),
        pytest.param(2, False, 2, id="at-the-start"),
        pytest.param(3, False, 2, id="inside-start"),
        pytest.param(3, True, 6, id="inside-end"),
        pytest.param(5, True, 6, id="end-of-the-replacement"),
        pytest.param(5, False, 6, id="start-after-the-replacement"),
        pytest.param(9, False, 10, id="after"),
        pytest.param(2, True, 2, id="end-before"),
    ],
)
def test_an_offset_maps_back_through_a_round_of_edits(offset, end, expected):
    # "ab[cdef]gh..." with [2, 6) replaced by 3 characters: after the edit, text moves left by 1.
    assert _back(offset, [(2, 6, 3)], end) == expected


def test_a_deletion_and_a_later_edit():
    # [1, 3) deleted, [5, 6) replaced by 4 characters: after the edits, offset 1 holds what was
    # at 3, offsets 3-6 the replacement of 5, offset 7 what was at 6.
    edits = [(1, 3, 0), (5, 6, 4)]
    assert _back(1, edits, False) == 3  # a start on what followed the deletion
    assert _back(1, edits, True) == 1  # an end before the deleted text
    assert _back(3, edits, False) == 5  # the start of the second replacement
    assert _back(7, edits, False) == 6
