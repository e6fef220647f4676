"""Device facts that cross a call through a return (issue 38): the sweep's ``device_returns``, and
the return that keeps its meaning where a caller tests its answer in front of CUDA code the port
leaves.

mmengine's ``is_cuda_available()`` returned ``torch.neuron.is_available()`` after the port, and
``AmpOptimWrapper``'s ``assert is_cuda_available() or ...`` then admitted a
``torch.cuda.amp.GradScaler`` that CN304 leaves to a person: the port reached CUDA code on
Trainium. The fixture project ``value_returns`` carries that case and an early exit's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cuda2neuron.workspace import discover, project_facts
from workspace_helpers import port_both, write_tree

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "value_returns"

PROBE = "import torch\n\ndef ready():\n    return torch.cuda.is_available()\n"
SCALER = (
    "import torch\nfrom pkg.probe import ready\n\nif hasattr(torch, 'npu'):\n    from torch.npu.amp import GradScaler\n"
    "else:\n    from torch.cuda.amp import GradScaler\n\ndef build():\n    assert ready(), 'gpu only'\n    return GradScaler()\n"
)
KERNEL = (
    "import triton\nimport triton.language as tl\n\n@triton.jit\ndef _k(x):\n    pass\n\n"
    "def fused(x):\n    _k[(1,)](x)\n    return x\n"
)

# (files, functions recorded, functions not recorded)
RETURNS = [
    pytest.param({"pkg/probe.py": PROBE, "pkg/scale.py": SCALER}, ["pkg.probe.ready"], (), id="an-assert-admits-a-conditional-import"),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/hook.py": "import torch\nfrom .probe import ready\n\ndef sync():\n    if not ready():\n        return\n    torch.cuda.set_sync_debug_mode(1)\n"},
        ["pkg.probe.ready"], (), id="an-early-exit-under-not-opens-what-follows",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE.replace("is_available()", "device_count()"), "pkg/hook.py": "import torch\nfrom pkg.probe import ready\n\ndef free():\n    if ready() > 1:\n        torch.cuda.set_sync_debug_mode(1)\n"},
        ["pkg.probe.ready"], (), id="a-count-compared",
    ),
    pytest.param(
        {"pkg/__init__.py": "from .probe import ready\n", "pkg/probe.py": PROBE, "pkg/ops.py": KERNEL,
         "pkg/use.py": "from pkg import ready\nfrom pkg.ops import fused\n\ndef run(x):\n    return fused(x) if ready() else x\n"},
        ["pkg.probe.ready"], (), id="a-package-re-export-in-front-of-a-triton-kernel",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/hook.py": "import torch\nfrom pkg.probe import ready\n\ndef free():\n    if ready():\n        torch.cuda.empty_cache()\n"},
        [], ("pkg.probe.ready",), id="only-code-that-moves-is-guarded",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/hook.py": "import torch\nfrom pkg.probe import ready\n\ndef sync():\n    if not ready():\n        torch.cuda.set_sync_debug_mode(1)\n"},
        [], ("pkg.probe.ready",), id="the-else-of-a-negated-test-is-not-opened",
    ),
    pytest.param(
        {"pkg/probe.py": "import torch\n\nclass P:\n    def ready(self):\n        return torch.cuda.is_available()\n",
         "pkg/hook.py": "import torch\nfrom pkg.probe import P\n\ndef sync():\n    if P().ready():\n        torch.cuda.set_sync_debug_mode(1)\n"},
        [], ("pkg.probe.P.ready",), id="a-method-is-not-followed",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/arch.py": "import os\nfrom pkg.probe import ready\n\ndef arch():\n    on = ready()\n    if not on:\n        os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n    return on\n"},
        ["pkg.probe.ready"], (), id="asked-by-a-function-that-sets-the-cuda-arch-list",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/arch.py": "import os\nfrom pkg.probe import ready\n\ndef arch():\n    on = ready()\n    os.environ['OMP_NUM_THREADS'] = '4'\n    return on\n"},
        [], ("pkg.probe.ready",), id="another-setting-is-no-cuda-build",
    ),
]


@pytest.mark.parametrize(("files", "expected", "plain"), RETURNS)
def test_the_sweep_records_a_return_whose_answer_fronts_cuda_code(tmp_path, files, expected, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    found = {name for name, _, _ in facts.device_returns}
    assert set(expected) <= found, facts.device_returns
    assert not found & set(plain), facts.device_returns




@pytest.fixture(scope="module")
def ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return port_both(PROJECT)


# (file, the function, what the port has on its last line in both runs, text the held finding's
#  message holds)
LINES = [
    pytest.param("retlib/devices.py", "cuda_ready", "torch.cuda.is_available()",
                 ("retlib/scaling.py:17", "retlib/scaling.py:15", "`cuda_ready()`"), id="the-assert-s-probe-keeps-its-meaning"),
    pytest.param("retlib/devices.py", "sync_ready", "torch.cuda.is_available()",
                 ("retlib/hooks.py:16", "retlib/hooks.py:14", "`sync_ready()`"), id="the-early-exit-s-probe-keeps-its-meaning"),
    pytest.param("retlib/devices.py", "gpu_count", "torch.neuron.device_count()", None, id="a-probe-in-front-of-moved-code-is-ported"),
    pytest.param("retlib/build.py", "have_gpu", "torch.cuda.is_available()",
                 ("retlib/build.py:13", "retlib/build.py:17", "`TORCH_CUDA_ARCH_LIST`"), id="the-cuda-build-s-probe-keeps-its-meaning"),
    pytest.param("retlib/hooks.py", "free_cache", "torch.neuron.empty_cache()", None, id="the-moved-code"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "function", "wanted", "where"), LINES)
def test_a_return_moves_only_where_its_guards_open_no_cuda_code(ports, unsafe, path, function, wanted, where):
    node = next(n for n in ast.parse((PROJECT / path).read_text()).body if getattr(n, "name", None) == function)
    line = node.end_lineno
    text, findings = ports[unsafe][path]
    assert wanted in text.splitlines()[line - 1], text.splitlines()[line - 1]
    if where is not None:
        held = [f for f in findings if f.span.start_line == line and not f.applied]
        assert held and all(w in held[0].message for w in where), [(f.code, f.span.start_line, f.message) for f in findings]
