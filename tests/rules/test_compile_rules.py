"""The torch.compile rules (CN501-CN505) together: aliases, decorators, shadowing, both targets."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source


def _fix(source: str, unsafe: bool = False, target: str = "neuron"):
    config = Config(select=("CN5",), unsafe_fixes=unsafe, settings=Settings(target=target))
    return fix_source(source, "t.py", config)


CASES = [
    pytest.param(
        'import torch\nm = torch.compile(m, mode="reduce-overhead", dynamic=True)\n',
        False,
        'import torch\nm = torch.compile(m, dynamic=True, backend="neuron")\n',
        id="safe-only-keeps-dynamic",
    ),
    pytest.param(
        'import torch\nm = torch.compile(m, mode="reduce-overhead", dynamic=True)\n',
        True,
        'import torch\nm = torch.compile(m, dynamic=False, backend="neuron")\n',
        id="unsafe-also-static-shapes",
    ),
    pytest.param(
        'import torch as th\n\n@th.compile(mode="max-autotune")\ndef step(x):\n    return x\n',
        False,
        'import torch as th\n\n@th.compile(backend="neuron")\ndef step(x):\n    return x\n',
        id="aliased-decorator",
    ),
    pytest.param(
        "from torch import compile\nm = compile(m, backend='inductor', mode='max-autotune-no-cudagraphs')\n",
        False,
        "from torch import compile\nm = compile(m, backend='neuron')\n",
        id="from-import-replaces-inductor",
    ),
    pytest.param(
        "import torch\n\ndef build(torch, m):\n    return torch.compile(m)\n",
        False,
        "import torch\n\ndef build(torch, m):\n    return torch.compile(m)\n",
        id="parameter-shadows-torch",
    ),
    pytest.param(
        "import torch\ncompile_fn = torch.compile\nm = compile(src, 'f', 'exec')\n",
        False,
        "import torch\ncompile_fn = torch.compile\nm = compile(src, 'f', 'exec')\n",
        id="reference-and-builtin-untouched",
    ),
    pytest.param(
        'import torch\nm = torch.compile(m, backend="neuron", mode="default", fullgraph=True)\n',
        True,
        'import torch\nm = torch.compile(m, backend="neuron", mode="default", fullgraph=True)\n',
        id="already-ported",
    ),
]


@pytest.mark.parametrize(("source", "unsafe", "expected"), CASES)
def test_compile_port(source, unsafe, expected):
    fixed, _ = _fix(source, unsafe=unsafe)
    assert fixed == expected
    again, _ = _fix(fixed, unsafe=unsafe)
    assert again == fixed


def test_accelerator_target_reports_without_rewriting():
    source = 'import torch\nm = torch.compile(m, mode="reduce-overhead", dynamic=True, options={"max_autotune": True})\n'
    fixed, findings = _fix(source, unsafe=True, target="accelerator")
    assert fixed == source
    assert {f.code for f in findings} == {"CN501", "CN502", "CN503"}
    assert all(f.guidance for f in findings)


def test_fullgraph_advice_is_display_only():
    source = 'import torch\nm = torch.compile(m, backend="neuron")\n'
    fixed, findings = _fix(source, unsafe=True)
    assert fixed == source
    (advice,) = [f for f in findings if f.code == "CN504"]
    assert advice.fix is not None and advice.fix.safety.value == "display-only"
    assert "fullgraph=True" in advice.fix.replacement
