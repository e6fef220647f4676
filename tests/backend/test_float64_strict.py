"""float64 is stored and computed as float32 (warned once); strict mode makes float64/complex errors."""

from __future__ import annotations

import functools
import subprocess
import warnings

import pytest
import torch

from neuron_testutil import run_python

F64_CASES = {
    "factory": lambda: torch.zeros(3, dtype=torch.float64, device="neuron"),
    "to_device": lambda: torch.randn(3, dtype=torch.float64).to("neuron"),
    "double()": lambda: torch.randn(3, device="neuron").double(),
    "sum_dtype": lambda: torch.randn(3, device="neuron").sum(dtype=torch.float64),
}


@pytest.mark.parametrize("name", list(F64_CASES))
def test_float64_becomes_float32(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = F64_CASES[name]()
    assert out.device.type == "neuron" and out.dtype == torch.float32


def test_float64_values_survive_as_float32():
    ref = torch.tensor([1.5, -2.25, 3.0], dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ref.to("neuron")
    torch.testing.assert_close(out.cpu(), ref.float())


def test_warning_is_given_once():
    proc = run_python("""
        import warnings, torch, cuda2neuron.backend as b
        b.activate()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            torch.zeros(2, dtype=torch.float64, device='neuron')
            torch.ones(2, dtype=torch.float64, device='neuron')
        print(sum('float64' in str(x.message) for x in w))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"


STRICT_CASES = {
    "f64-factory": "torch.zeros(2, dtype=torch.float64, device='neuron')",
    "complex-copy": "torch.randn(2, dtype=torch.complex64).to('neuron')",
    "double()": "torch.randn(2, device='neuron').double()",
}


@functools.cache
def _strict_run(how: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """One fresh process per way of turning strict mode on (the switch is per process), trying
    every case in turn, and what it printed for each: a process per case spent ~2.5 s of CPU
    importing torch for one line. Each case is its own try, so one that is allowed cannot hide
    another's refusal, and a refusal raises before anything reaches the device."""
    env = {"CUDA2NEURON_STRICT": "1"} if how == "env" else {}
    arg = "strict=True" if how == "activate" else ""
    tries = "".join(f"""
        try:
            {code}
        except RuntimeError as exc:
            print({name!r}, 'REFUSED', 'strict' in str(exc))
        else:
            print({name!r}, 'ALLOWED')""" for name, code in STRICT_CASES.items())
    proc = run_python(f"""
        import torch, cuda2neuron.backend as b
        b.activate({arg})""" + tries, env=env)
    said = dict(line.partition(" ")[::2] for line in proc.stdout.splitlines())
    return proc, said


@pytest.mark.parametrize("name", list(STRICT_CASES))
@pytest.mark.parametrize("how", ["env", "activate"])
def test_strict_mode_refuses(name, how):
    proc, said = _strict_run(how)
    assert proc.returncode == 0, proc.stderr
    assert said.get(name) == "REFUSED True", proc.stdout


def test_complex_is_allowed_when_not_strict():
    z = torch.randn(3, dtype=torch.complex64).to("neuron")
    assert z.dtype == torch.complex64
    torch.testing.assert_close((z * 2).cpu(), z.cpu() * 2)
