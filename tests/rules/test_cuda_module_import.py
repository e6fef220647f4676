"""CN212 drops `import torch.backends.cudnn` and friends because `import torch` loads them: checked
against the installed torch, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda2neuron.rules.cuda_api.cn212_cuda_module_import import _CUDA_MODULES

pytest.importorskip("torch")


def test_import_torch_loads_every_module_cn212_drops():
    probe = "import sys, torch; print(' '.join(m for m in sys.argv[1:] if m not in sys.modules))"
    missing = subprocess.run([sys.executable, "-c", probe, *_CUDA_MODULES], capture_output=True, text=True, check=True)
    assert missing.stdout.strip() == "", f"`import torch` does not load: {missing.stdout.strip()}"
