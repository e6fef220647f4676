"""The linked pairs real ports got half right, each in both orders, through the whole catalog.

Each half alone was a right edit; together they were wrong (python/_groups.py):

* ``if torch.is_autocast_enabled():`` asked about Neuron (safe) while the branch inside stayed
  ``if t.device.type == "cuda": ... else: raise`` (unsafe): a no-op became a raise under neuron
  autocast. Now both wait for --unsafe-fixes, and move together with it.
* ``if torch.cuda.is_available() or ...:`` asked about Neuron while its body still calls CUDA
  through ``mod = torch.xpu if ... else torch.cuda``: a block skipped on Trainium ran CUDA calls.
  Now the test stays, reported with the body's finding.
* ``os.environ.get("CUDA_VISIBLE_DEVICES")`` renamed (safe) while the value is split on commas
  and written back to ``CUDA_VISIBLE_DEVICES`` below (unsafe): two variables, and a ``0-3``
  range read as one item. Now the sites move together, with --unsafe-fixes, and say why.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.workspace import fix_source

AUTOCAST_GUARD_OUTER = '''import torch

def cast(t):
    if torch.is_autocast_enabled():
        if t.device.type == "cuda":
            dtype = torch.get_autocast_gpu_dtype()
        elif t.device.type == "cpu":
            dtype = torch.get_autocast_cpu_dtype()
        else:
            raise NotImplementedError()
        return t.to(dtype)
    return t
'''
AUTOCAST_GUARD_OUTER_PORTED = AUTOCAST_GUARD_OUTER.replace(
    "is_autocast_enabled()", 'is_autocast_enabled("neuron")'
).replace('type == "cuda"', 'type == "neuron"').replace("get_autocast_gpu_dtype()", 'get_autocast_dtype("neuron")')

AUTOCAST_GUARD_INNER = '''import torch

def cast(t):
    if t.device.type == "cuda":
        if torch.is_autocast_enabled():
            return t.to(torch.get_autocast_gpu_dtype())
    return t
'''
AUTOCAST_GUARD_INNER_PORTED = AUTOCAST_GUARD_INNER.replace(
    "is_autocast_enabled()", 'is_autocast_enabled("neuron")'
).replace('type == "cuda"', 'type == "neuron"').replace("get_autocast_gpu_dtype()", 'get_autocast_dtype("neuron")')

AVAILABLE_OR_MODULE_VALUE = '''import torch

def total_memory():
    if torch.cuda.is_available() or hasattr(torch, "xpu"):
        mod = torch.xpu if hasattr(torch, "xpu") and torch.xpu.is_available() else torch.cuda
        return mod.get_device_properties(0).total_memory
    return 0
'''
MODULE_VALUE_OR_AVAILABLE = AVAILABLE_OR_MODULE_VALUE.replace(
    'torch.cuda.is_available() or hasattr(torch, "xpu")', 'hasattr(torch, "xpu") or torch.cuda.is_available()'
)

ENV_READ_THEN_WRITE = '''import os

def keep_two():
    devs = os.environ.get("CUDA_VISIBLE_DEVICES")
    if devs is not None:
        ids = devs.split(",")
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:2])
'''
ENV_WRITE_THEN_READ = '''import os

def pin(args):
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    world = len(os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
    return world
'''
ENV_RANGE = '''import os

def setup():
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    n = len(os.environ["CUDA_VISIBLE_DEVICES"].split(","))
    return n
'''
ENV_RANGE_PORTED = ENV_RANGE.replace('"0,1,2,3"', '"0-3"').replace("CUDA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES")


def _renamed(source: str) -> str:
    return source.replace("CUDA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES")


@pytest.mark.parametrize(
    ("source", "unsafe", "expected"),
    [
        pytest.param(AUTOCAST_GUARD_OUTER, False, AUTOCAST_GUARD_OUTER, id="autocast-guard-waits-for-its-unsafe-branch"),
        pytest.param(AUTOCAST_GUARD_OUTER, True, AUTOCAST_GUARD_OUTER_PORTED, id="autocast-guard-moves-with-its-branch"),
        pytest.param(AUTOCAST_GUARD_INNER, False, AUTOCAST_GUARD_INNER, id="device-test-holds-the-autocast-query-inside"),
        pytest.param(AUTOCAST_GUARD_INNER, True, AUTOCAST_GUARD_INNER_PORTED, id="device-test-and-autocast-query-move"),
        pytest.param(AVAILABLE_OR_MODULE_VALUE, False, AVAILABLE_OR_MODULE_VALUE, id="is-available-or-waits-for-cuda-module-value"),
        pytest.param(AVAILABLE_OR_MODULE_VALUE, True, AVAILABLE_OR_MODULE_VALUE, id="is-available-or-waits-even-unsafe"),
        pytest.param(MODULE_VALUE_OR_AVAILABLE, False, MODULE_VALUE_OR_AVAILABLE, id="or-is-available-waits-for-cuda-module-value"),
        pytest.param(ENV_READ_THEN_WRITE, False, ENV_READ_THEN_WRITE, id="env-read-waits-for-its-write"),
        pytest.param(ENV_READ_THEN_WRITE, True, _renamed(ENV_READ_THEN_WRITE), id="env-read-and-write-move"),
        pytest.param(ENV_WRITE_THEN_READ, False, ENV_WRITE_THEN_READ, id="env-write-holds-the-read-below"),
        pytest.param(ENV_WRITE_THEN_READ, True, _renamed(ENV_WRITE_THEN_READ), id="env-write-and-read-move"),
        pytest.param(ENV_RANGE, False, ENV_RANGE, id="env-range-write-waits-for-the-split-read"),
        pytest.param(ENV_RANGE, True, ENV_RANGE_PORTED, id="env-range-write-and-split-read-move"),
    ],
)
def test_linked_pair_moves_together_or_stays(source, unsafe, expected):
    out, findings = fix_source(source, "m.py", Config(unsafe_fixes=unsafe))
    assert out == expected
    if out == source:
        held = [f for f in findings if f.fix is not None and not f.applied]
        assert held, "a pair left as it is is reported"
        assert all(f.manual for f in findings)
    again, _ = fix_source(out, "m.py", Config(unsafe_fixes=unsafe))
    assert again == out


def test_a_held_guard_names_what_holds_it():
    _, findings = fix_source(AVAILABLE_OR_MODULE_VALUE, "m.py", Config())
    (guard,) = [f for f in findings if f.code == "CN201"]
    assert not guard.applied and "CN211 at line 5" in guard.guidance


@pytest.mark.parametrize("source", [ENV_READ_THEN_WRITE, ENV_RANGE], ids=["through-a-name", "at-once"])
def test_a_read_split_on_commas_says_the_range_is_misread(source):
    _, findings = fix_source(source, "m.py", Config())
    reads = [f for f in findings if f.code == "CN405" and "split on commas" in f.guidance]
    assert reads and "0-3" in reads[0].guidance
