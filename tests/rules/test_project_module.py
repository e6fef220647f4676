"""Which project kernel module a relative import names, however the run was given its path.

``relative_module`` offers every reading of ``from .x import f`` down the file's folders,
those above the project's root included; ``project_module`` must land on the same module for
``check .`` and ``check /abs/checkout``. The trap is a checkout folder named like the package
it holds (unsloth/unsloth/...): from an absolute path, the longest reading lies inside the
kernel package ``unsloth`` itself."""

from __future__ import annotations

import pytest

from cuda2neuron.core import ProjectFacts
from rules._shared.kernels import project_module, relative_module

# The project's kernel modules are named relative to the root the sweep ran from.
FACTS = ProjectFacts(
    kernel_modules=frozenset({"unsloth", "unsloth.kernels.utils"}),
    kernel_names=frozenset({"unsloth.fast_rope"}),
)

CASES = [
    # (id, path of the importing file, dots, module, imported name, expected)
    ("relative-run", "unsloth/kernels/fast_lora.py", 1, "utils", "fast_dequantize", "unsloth.kernels.utils.fast_dequantize"),
    ("absolute-run-checkout-named-like-package", "/home/u/unsloth/unsloth/kernels/fast_lora.py", 1, "utils",
     "fast_dequantize", "unsloth.kernels.utils.fast_dequantize"),
    ("absolute-run-two-dots", "/srv/unsloth/unsloth/kernels/moe/ops.py", 2, "utils", "fast_dequantize",
     "unsloth.kernels.utils.fast_dequantize"),
    # Inside the kernel package alone: only the names the sweep saw reach a kernel count.
    ("package-name-recorded", "/home/u/unsloth/unsloth/models/llama.py", 2, None, "fast_rope", "unsloth.fast_rope"),
    ("package-name-not-recorded", "/home/u/unsloth/unsloth/models/llama.py", 2, None, "plain_helper", None),
    ("not-a-kernel-module", "/home/u/unsloth/studio/core/diffusion.py", 1, "speed", "SPEED_DEFAULT", None),
]


@pytest.mark.parametrize(("path", "level", "module", "name", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_relative_import_names_one_module(path: str, level: int, module: str | None, name: str, expected: str | None) -> None:
    candidates = tuple(f"{base}.{name}" for base in relative_module(path, level, module))
    assert project_module(FACTS, candidates) == expected
