"""The coarse trigger prefilter: it covers every rule's triggers, so skipping a file on it never
hides a finding; and a file it skips is checked without importing the catalog or libcst."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cuda2neuron.kinds import catalog
from cuda2neuron.kinds import COARSE_WORDS, covers, may_trigger

_CATALOG = catalog()


def _kind_rows():
    for code, rule in _CATALOG.items():
        for kind in sorted(rule.file_kinds):
            yield pytest.param(rule, kind, id=f"{code}-{kind}")


@pytest.mark.parametrize(("rule", "kind"), list(_kind_rows()))
def test_every_trigger_contains_a_coarse_word(rule, kind):
    words = COARSE_WORDS.get(kind, ())
    uncovered = [t for t in rule.triggers if not any(covers(w, t) for w in words)]
    assert not uncovered, (
        f"{rule.code} triggers {uncovered} contain no coarse word for {kind!r} files: add a word to "
        f"COARSE_WORDS[{kind!r}] in cuda2neuron/kinds/_prefilter.py, or files holding only these words "
        "are skipped before the rule is loaded"
    )


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_notebook_words_include_the_kinds_a_notebook_runs(kind):
    # Notebook code cells go through the Python rules and `!` lines through the shell rules.
    assert set(COARSE_WORDS[kind]) <= set(COARSE_WORDS["notebook"])


@pytest.mark.parametrize(
    ("data", "kind", "expected"),
    [
        pytest.param(b"import os\nprint(1)\n", "python", False, id="python-plain"),
        pytest.param(b"x = y.cuda()\n", "python", True, id="python-cuda"),
        pytest.param(b"assert t.is_CUDA\n", "python", True, id="python-any-case"),
        pytest.param("# caf\u00e9\nx.to(dev)\n".encode(), "python", True, id="python-non-ascii-bytes"),
        pytest.param("x.to(dev)\n", "python", True, id="python-text"),
        pytest.param(b"echo hello\n", "shell", False, id="shell-plain"),
        pytest.param(b"nvidia-smi -L\n", "shell", True, id="shell-nvidia-smi"),
        pytest.param(b"numpy\nrequests\n", "requirements", False, id="requirements-plain"),
        pytest.param(b"torch==2.3.1+cu121\n", "requirements", True, id="requirements-wheel-tag"),
        pytest.param(b'{"cells": [{"cell_type": "code", "source": ["x = 1"]}]}', "notebook", False,
                     id="notebook-plain"),
        pytest.param(b'{"cells": [{"cell_type": "code", "source": ["!nproc"]}]}', "notebook", True,
                     id="notebook-shell-word"),
        pytest.param(b"x = y.cuda()\n", "no-such-kind", False, id="unknown-kind"),
    ],
)
def test_may_trigger(data, kind, expected):
    assert may_trigger(data, kind) is expected


_PROBE = """
import sys
from cuda2neuron.cli import main
main(["check", sys.argv[1]])
loaded = sorted(m for m in sys.modules if m == "libcst" or m.startswith("cuda2neuron.rules"))
print("LOADED:" + ",".join(loaded))
"""
_NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "outputs": [],
               "source": ["import os\n", "print(os.getcwd())"]}],
    "metadata": {"language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.mark.parametrize(
    ("name", "text", "loads"),
    [
        pytest.param("plain.py", "import os\nprint(1)\n", False, id="python-plain"),
        pytest.param("plain.ipynb", json.dumps(_NOTEBOOK), False, id="notebook-plain"),
        pytest.param("run.sh", "#!/bin/bash\necho hello\n", False, id="shell-plain"),
        pytest.param("requirements.txt", "numpy\nrequests\n", False, id="requirements-plain"),
        pytest.param("train.py", "import torch\nx = torch.zeros(3).cuda()\n", True, id="python-cuda"),
    ],
)
def test_a_file_without_coarse_words_loads_neither_catalog_nor_libcst(tmp_path, name, text, loads):
    path = tmp_path / name
    path.write_text(text)
    out = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, check=False)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert line.startswith("LOADED:"), out.stderr
    loaded = line.removeprefix("LOADED:")
    if loads:
        assert "libcst" in loaded.split(",") and "cuda2neuron.rules" in loaded.split(","), loaded
    else:
        assert loaded == "", loaded
