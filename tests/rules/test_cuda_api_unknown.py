"""CN211 is the catalog's safety net: every torch.cuda name is reported or ported by some rule."""

from __future__ import annotations

import pytest
import torch

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import lint_source
from rules.cuda_api.cn211_cuda_api_unknown import HANDLED_ELSEWHERE, HANDLED_WHEN_CALLED

# Every name torch.cuda has (its submodules too), as torch 2.13 ships it.
NAMES = sorted(n for n in dir(torch.cuda) if not n.startswith("__"))
CONTEXTS = {
    "reference": "import torch\nx = torch.cuda.{}\n",
    "call": "import torch\ntorch.cuda.{}()\n",
}


def _codes(source: str, config: Config | None = None) -> set[str]:
    return {f.code for f in lint_source(source, "t.py", config) if f.line == 2}


@pytest.mark.parametrize("target", ["neuron", "accelerator"])
@pytest.mark.parametrize("context", list(CONTEXTS))
def test_every_torch_cuda_name_gets_a_finding(context, target):
    config = Config(settings=Settings(target=target))
    silent = [n for n in NAMES if not _codes(CONTEXTS[context].format(n), config)]
    assert len(NAMES) > 150  # the enumeration really read torch.cuda
    assert silent == []


@pytest.mark.parametrize("context", list(CONTEXTS))
def test_the_safety_net_stays_quiet_where_another_rule_reports(context):
    doubled = [n for n in NAMES if {"CN211"} < _codes(CONTEXTS[context].format(n))]
    assert doubled == []


@pytest.mark.parametrize(
    ("name", "code", "contexts"),
    [pytest.param(n, c, ("reference", "call"), id=n) for n, c in HANDLED_ELSEWHERE.items()]
    + [pytest.param(n, c, ("call",), id=f"{n}-called") for n, c in HANDLED_WHEN_CALLED.items()],
)
def test_a_name_left_to_another_rule_is_reported_by_it(name, code, contexts):
    """A stale row would hide a name from both rules."""
    config = Config(select=(code,))
    for context in contexts:
        source = CONTEXTS[context].replace("torch.cuda.{}", name)
        assert code in _codes(source, config), context


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param("import torch\ntorch.cuda.set_per_process_memory_fraction(0.9)\n", "caching allocator", id="allocator"),
        pytest.param("import torch\nu = torch.cuda.utilization()\n", "NVML", id="monitoring"),
        pytest.param("import torch\ntorch.cuda.memory._record_memory_history(True)\n", "`torch.cuda.memory._record_memory_history`: a private", id="private-in-submodule"),
        pytest.param("import torch\nx = torch.cuda.jiterator._create_jit_fn(code)\n", "`torch.cuda.jiterator._create_jit_fn`", id="private-named-to-its-first-private-part"),
        pytest.param("import torch\nn = torch.cuda.some_api_of_torch_3(1)\n", "`torch.cuda.some_api_of_torch_3`: TorchNeuron has no counterpart", id="a-name-no-one-knows"),
        pytest.param("import torch\nhas = torch.cuda.cudart().cudaProfilerStart()\n", "runtime's own binding", id="cudart"),
    ],
)
def test_what_the_finding_says(source, message):
    found = [f for f in lint_source(source, "t.py", Config(select=("CN211",))) if f.line == 2]
    assert len(found) == 1
    assert message in found[0].message
