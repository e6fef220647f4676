"""Every import form of every CUDA-only package is reported by its rule, with guidance.

A port that converts the calls but leaves `import flash_attn` behind fails on a Trainium host at
import time; the finding on the import is what tells the user.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, Effort
from cuda2neuron.workspace import lint_source

PACKAGES = [
    ("triton", "triton.language", "jit", "CN601"),
    ("flash_attn", "flash_attn.flash_attn_interface", "flash_attn_func", "CN604"),
    ("xformers", "xformers.ops", "memory_efficient_attention", "CN605"),
    ("apex", "apex.optimizers", "FusedAdam", "CN606"),
    ("bitsandbytes", "bitsandbytes.optim", "AdamW8bit", "CN607"),
    ("nvtx", "nvtx", "annotate", "CN610"),
    ("cupy", "cupy.cuda", "Device", "CN612"),
    ("pynvml", "pynvml", "nvmlInit", "CN613"),
]


def _forms():
    for top, sub, name, code in PACKAGES:
        yield pytest.param(f"import {top}\n", code, id=f"{top}-import")
        yield pytest.param(f"import {sub} as alias\n", code, id=f"{top}-import-as")
        yield pytest.param(f"from {sub} import {name}\n", code, id=f"{top}-from-import")
        yield pytest.param(
            f"try:\n    from {sub} import {name}\nexcept ImportError:\n    {name} = None\n",
            code,
            id=f"{top}-guarded-import",
        )


@pytest.mark.parametrize(("source", "code"), list(_forms()))
def test_import_is_reported_with_guidance(source, code):
    findings = [f for f in lint_source(source, "t.py", Config()) if f.code == code]
    assert len(findings) == 1
    assert findings[0].guidance
    assert findings[0].effort is not Effort.NONE


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("from . import triton_ops\n", id="relative-project-module"),
        pytest.param("import tritonclient.http\n", id="similar-name"),
        pytest.param("import apex_utils\n", id="prefix-is-not-package"),
        pytest.param('IMPL = "flash_attn"\n', id="selector-string"),
    ],
)
def test_lookalikes_are_not_reported(source):
    codes = {f.code for f in lint_source(source, "t.py", Config())}
    assert not codes & {c for *_, c in PACKAGES}
