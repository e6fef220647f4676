"""CN801-CN803 in context: what counts as device use, host code, and aliases."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.workspace import fix_source, lint_source


def _codes(source: str) -> list[str]:
    return [f.code for f in lint_source(source, "t.py", Config()) if f.code.startswith("CN8")]


FORK = [
    pytest.param(
        "import multiprocessing as mp\nx = x.cuda()\np = mp.Process(target=f)\n", ["CN803"], id="cuda-method"
    ),
    pytest.param(
        "import torch.multiprocessing as tmp\nd = torch.device('neuron')\nwith tmp.Pool(2) as p:\n    pass\n",
        ["CN803"],
        id="neuron-string-torch-mp-pool",
    ),
    pytest.param(
        "from multiprocessing import Process\nimport torch\nif torch.cuda.is_available():\n    pass\n"
        "Process(target=f).start()\n",
        ["CN803"],
        id="from-import-process",
    ),
    pytest.param(
        "import multiprocessing as mp\nctx = mp.get_context('spawn')\nx = x.cuda()\np = ctx.Process(target=f)\n",
        [],
        id="spawn-context",
    ),
    pytest.param(
        "from concurrent.futures import ProcessPoolExecutor\nimport multiprocessing as mp\nx = x.cuda()\n"
        "ex = ProcessPoolExecutor(4, mp_context=mp.get_context('spawn'))\n",
        [],
        id="executor-with-spawn-context",
    ),
    pytest.param("import multiprocessing as mp\np = mp.Process(target=f)\n", [], id="no-device-in-file"),
]


@pytest.mark.parametrize(("source", "expected"), FORK)
def test_fork_needs_device_use_and_no_spawn(source, expected):
    assert _codes(source) == expected


DTYPES = [
    pytest.param("import torch\nx = torch.ones(2, dtype=torch.float64, device=dev)\n", ["CN801"], id="float64-dtype"),
    pytest.param("import torch as t\nx = t.ones(2, device=dev).to(t.double)\n", ["CN801"], id="aliased-double"),
    # Made on the host (a factory without a device): float64 stays float64 there.
    pytest.param("import torch\nx = torch.ones(2, dtype=torch.float64)\n", [], id="float64-host-factory"),
    pytest.param("import torch as t\nx = t.ones(2).to(t.double)\n", [], id="aliased-double-host"),
    pytest.param("from torch import float64\nx = y.to(float64)\n", ["CN801"], id="from-import-float64"),
    pytest.param(
        "from torch import view_as_complex\nz = view_as_complex(x)\n", ["CN802"], id="from-import-view-as-complex"
    ),
    pytest.param("import numpy as np\nx = np.float64(1.0)\n", [], id="numpy-host"),
    pytest.param("import torch\nz = torch.zeros(2, dtype=torch.cfloat)\n", ["CN802"], id="cfloat"),
    pytest.param("import torch\ns = torch.stft(x, 256, return_complex=True)\n", ["CN802"], id="stft"),
    pytest.param("import torch\ndef f(torch):\n    return torch.view_as_complex(x)\n", [], id="shadowed-torch"),
]


@pytest.mark.parametrize(("source", "expected"), DTYPES)
def test_float64_and_complex(source, expected):
    assert _codes(source) == expected


def test_float64_fix_needs_unsafe():
    source = "import torch\nx = torch.ones(2, dtype=torch.float64, device=dev).double()\n"
    safe, _ = fix_source(source, "t.py", Config())
    unsafe, _ = fix_source(source, "t.py", Config(unsafe_fixes=True))
    assert safe == source
    assert unsafe == "import torch\nx = torch.ones(2, dtype=torch.float32, device=dev).float()\n"
