"""Trigger words of the rules that compare setting keys match as the keys compare.

CN627, CN709 and CN737 read a setting key through ``normalize_key`` (case ignored, ``-`` read
as ``_``), so ``--Use-Flash-Attn`` is their ``use_flash_attn``. Their trigger words were matched
as written, in the coarse prefilter and in the wake, so a file whose only setting was spelled
that way was never handed to the rule: reported with the prefilter off, silent with it on.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import catalog, may_trigger, process_bytes
from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._python import _awake

_ARGS = "import argparse\np = argparse.ArgumentParser()\n"

# (file name, source, the rule that reports it, the key its message names)
SPELLINGS = [
    pytest.param("a.py", _ARGS + "p.add_argument('--Use-Flash-Attn', default=True, action='store_true')\n",
                 "CN627", "Use-Flash-Attn", id="py-flag-mixed-case-hyphens"),
    pytest.param("a.py", "config = {'Use-Flash-Attn': True}\n", "CN627", "Use-Flash-Attn", id="py-dict-key-hyphens"),
    pytest.param("a.py", "USE_FLASH_ATTN = True\n", "CN627", "USE_FLASH_ATTN", id="py-upper-case-constant"),
    pytest.param("a.py", _ARGS + "p.add_argument('--Dynamo-Backend', default='inductor')\n",
                 "CN627", "Dynamo-Backend", id="py-flag-dynamo-backend"),
    pytest.param("run.sh", "#!/bin/bash\npython train.py --Use-Flash-Attn true\n", "CN709", "--Use-Flash-Attn",
                 id="shell-flag-mixed-case"),
    pytest.param("train.yaml", "model:\n  Attn-Implementation: Flash_Attention_2\n", "CN737", "Attn-Implementation",
                 id="yaml-key-and-value-mixed-case"),
]


@pytest.mark.parametrize(("name", "source", "code", "key"), SPELLINGS)
def test_setting_spelled_as_keys_compare_is_reported(name, source, code, key):
    result = process_bytes(name, source.encode(), Config(), RunOptions(fix=False))
    assert [f.code for f in result.findings] == [code]
    assert f"`{key}" in result.findings[0].message


@pytest.mark.parametrize(("name", "source", "code", "key"), [p for p in SPELLINGS if p.values[0].endswith(".py")])
def test_python_prefilter_and_wake_let_it_through(name, source, code, key):
    data = source.encode()
    assert may_trigger(data, "python")
    rule = catalog()[code]
    assert _awake((rule,), code_text(data), ()) == (rule,)


def test_folding_only_widens_the_coarse_prefilter():
    # "-" read as "_" in the words too: a coarse word written with a hyphen still matches.
    assert may_trigger(b"torch.compile(m, mode='max-autotune')\n", "python")
    assert not may_trigger(b"import os\nprint(os.getcwd())\n", "python")
