"""activate() refuses where the real TorchNeuron is installed or PrivateUse1 is taken."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from neuron_testutil import run_python

ACTIVATE = """
    import cuda2neuron.backend as b
    try:
        b.activate()
    except b.BackendUnavailable as exc:
        print('REFUSED', exc)
    else:
        print('ACTIVATED')
"""


def test_refuses_when_torch_neuronx_is_importable(tmp_path: Path):
    fake = tmp_path / "torch_neuronx"
    fake.mkdir()
    (fake / "__init__.py").write_text("# stands in for the real TorchNeuron package\n")
    proc = run_python(ACTIVATE, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("REFUSED") and "torch_neuronx" in proc.stdout
    avail = run_python("import cuda2neuron.backend as b; print(b.is_available())", env={"PYTHONPATH": str(tmp_path)})
    assert avail.stdout.strip() == "False"


@pytest.mark.parametrize("other", ["foo", "npu"])
def test_refuses_when_another_privateuse1_backend_is_registered(other: str):
    proc = run_python(f"import torch; torch.utils.rename_privateuse1_backend({other!r})\n" + textwrap.dedent(ACTIVATE))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("REFUSED") and other in proc.stdout


def test_activates_in_a_clean_process():
    proc = run_python(ACTIVATE)
    assert proc.stdout.strip() == "ACTIVATED", proc.stderr
