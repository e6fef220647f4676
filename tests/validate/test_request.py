"""build_request: options and the [tool.cuda2neuron.validate] table into one ValidateRequest (no runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.validate import RequestError, build_request
from cuda2neuron.validate._trees import Trees

TREES = Trees(Path("/o"), Path("/p"), "o at HEAD", "/p")

# (id, table, options, expected request fields)
GOOD = [
    ("defaults", {}, {"entry": "e:b"}, {"mode": "entry", "steps": 3, "timeout": 600.0, "seed": 0, "args": ()}),
    ("table-supplies-mode-and-numbers", {"script": "train.py", "args": ["--x"], "steps": 1, "timeout": 5, "seed": 7},
     {}, {"mode": "script", "script": "train.py", "args": ("--x",), "steps": 1, "timeout": 5.0, "seed": 7}),
    ("options-win", {"entry": "t:b", "steps": 1, "seed": 7}, {"script": "s.py", "steps": 2, "seed": 0},
     {"mode": "script", "entry": None, "steps": 2, "seed": 0}),
    ("own-args-beat-table-args", {"script": "train.py", "args": ["--x"]}, {"args": ("--y",)}, {"args": ("--y",)}),
    ("labels-from-trees", {}, {"entry": "e:b"}, {"original_label": "o at HEAD", "port_label": "/p"}),
    ("one-process-by-default", {}, {"entry": "e:b"}, {"nproc": 1}),
    ("nproc-option", {}, {"script": "train.py", "nproc": 2}, {"nproc": 2, "script": "train.py"}),
    ("nproc-from-table", {"script": "train.py", "nproc": 4}, {}, {"nproc": 4}),
    ("nproc-option-beats-table", {"script": "train.py", "nproc": 4}, {"nproc": 2}, {"nproc": 2}),
    # a torchrun command line as the script: validate launches the ranks itself
    ("torchrun-launch", {}, {"script": "torchrun", "args": ("--standalone", "--nproc_per_node=2", "train.py", "--steps", "3")},
     {"script": "train.py", "args": ("--steps", "3"), "nproc": 2}),
    ("torchrun-separate-values", {}, {"script": "torch.distributed.run",
                                      "args": ("--nnodes", "1", "--nproc-per-node", "3", "--master_port", "1234", "t.py")},
     {"script": "t.py", "args": (), "nproc": 3}),
    ("torchrun-nproc-option-wins", {}, {"script": "torchrun", "args": ("--nproc_per_node=4", "t.py"), "nproc": 2},
     {"nproc": 2}),
    ("torchrun-from-table", {"script": "torchrun", "args": ["--nproc_per_node=2", "train.py", "--x"]}, {},
     {"script": "train.py", "args": ("--x",), "nproc": 2}),
    # the autocast-off logic pair: on unless --no-logic or `logic = false`
    ("logic-pair-by-default", {}, {"entry": "e:b"}, {"logic": True}),
    ("logic-off-in-table", {"entry": "e:b", "logic": False}, {}, {"logic": False}),
    ("no-logic-option-beats-table", {"entry": "e:b", "logic": True}, {"logic": False}, {"logic": False}),
    # how many of the steps the logic pair runs
    ("logic-two-steps-by-default", {}, {"entry": "e:b"}, {"logic_steps": 2}),
    ("logic-steps-in-table", {"entry": "e:b", "logic_steps": 3}, {}, {"logic_steps": 3}),
    ("logic-steps-option-beats-table", {"entry": "e:b", "logic_steps": 3}, {"logic_steps": 1}, {"logic_steps": 1}),
]


@pytest.mark.parametrize(("table", "options", "expected"), [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_options_then_table_then_defaults(table, options, expected):
    request = build_request(TREES, table, **options)
    assert {k: getattr(request, k) for k in expected} == expected


def test_tolerances_merge_table_then_options():
    request = build_request(TREES, {"entry": "e:b", "tolerances": {"pass_factor": 5.0, "warn_factor": 50.0}},
                            tolerances={"pass_factor": 2.0})
    assert (request.tolerances.pass_factor, request.tolerances.warn_factor) == (2.0, 50.0)


# (id, table, options, message fragment, option at fault)
BAD = [
    ("both-modes", {}, {"entry": "e:b", "script": "s.py"}, "exclusive", None),
    ("table-sets-both", {"entry": "e:b", "script": "s.py"}, {}, "sets both entry and script", None),
    ("no-mode", {}, {}, "give --entry module:callable or --script", None),
    ("args-without-script", {}, {"entry": "e:b", "args": ("--x",)}, "for --script only", None),
    ("unknown-tolerance", {}, {"entry": "e:b", "tolerances": {"fudge": 2.0}}, "unknown tolerance", "--tolerance"),
    ("zero-ranks-in-table", {"script": "t.py", "nproc": 0}, {}, "nproc must be a whole number", "--nproc"),
    ("ranks-as-text-in-table", {"script": "t.py", "nproc": "2"}, {}, "nproc must be a whole number", "--nproc"),
    ("torchrun-without-script", {}, {"script": "torchrun", "args": ("--nproc_per_node=2",)}, "name the training script",
     None),
    ("torchrun-gpu-count", {}, {"script": "torchrun", "args": ("--nproc_per_node=gpu", "t.py")}, "number of ranks",
     "--nproc"),
    ("torchrun-multi-node", {}, {"script": "torchrun", "args": ("--nnodes=2", "t.py")}, "one node", None),
    ("torchrun-module", {}, {"script": "torchrun", "args": ("-m", "pkg.train")}, "script file", None),
    ("logic-as-text-in-table", {"entry": "e:b", "logic": "no"}, {}, "logic must be true or false", "--no-logic"),
    ("logic-steps-zero-in-table", {"entry": "e:b", "logic_steps": 0}, {}, "logic_steps must be a whole number",
     "--logic-steps"),
    ("logic-steps-as-text-in-table", {"entry": "e:b", "logic_steps": "2"}, {}, "logic_steps must be a whole number",
     "--logic-steps"),
]


@pytest.mark.parametrize(("table", "options", "fragment", "option"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_request_that_cannot_run_is_refused(table, options, fragment, option):
    with pytest.raises(RequestError) as info:
        build_request(TREES, table, **options)
    assert fragment in str(info.value)
    assert info.value.option == option
