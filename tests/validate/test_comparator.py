"""The streaming comparator: when records are judged, and with what."""

from __future__ import annotations

from pathlib import Path

import torch

from cuda2neuron.validate._model import Verdict
from cuda2neuron.validate._recorder import tensor_record
from cuda2neuron.validate._runner import ValidateRequest, _Comparator


def _rec(key: str, kind: str, t: torch.Tensor) -> dict:
    r = tensor_record(t)
    r.update(key=key, kind=kind, step=0, module_path="0:attn.bias", module_class=None)
    return r


def _comparator() -> _Comparator:
    return _Comparator(ValidateRequest(original=Path("o"), port=Path("p"), mode="entry", entry="e:b"), [False])


def test_a_finished_port_does_not_make_the_last_records_skip_the_golden():
    c = _comparator()
    value = torch.linspace(-1, 1, 8)
    c.add("reference", _rec("final/param/0:attn.bias", "param", value))
    c.add("port", _rec("final/param/0:attn.bias", "param", value + 1e-6))
    c.drop_role("port")  # the port's stream ended before the golden's
    assert "final/param/0:attn.bias" not in c.results
    c.add("golden", _rec("final/param/0:attn.bias", "param", value.double()))
    assert "vs golden" in c.results["final/param/0:attn.bias"].reason


def test_a_finished_golden_releases_what_waited_for_it():
    c = _comparator()
    value = torch.linspace(-1, 1, 8)
    c.add("reference", _rec("s0/grad/0:attn.bias", "grad", value))
    c.add("port", _rec("s0/grad/0:attn.bias", "grad", value))
    c.drop_role("golden")
    assert "vs reference" in c.results["s0/grad/0:attn.bias"].reason


def test_noise_level_gradients_are_left_out_of_the_final_parameters():
    c = _comparator()
    grad = torch.tensor([2e-3, -1e-3, 1e-11, -3e-11])
    c.add("reference", _rec("s0/grad/0:attn.bias", "grad", grad))
    c.add("port", _rec("s0/grad/0:attn.bias", "grad", grad))
    c.add("golden", _rec("s0/grad/0:attn.bias", "grad", torch.tensor([2e-3, -1e-3, -2e-11, 4e-11]).double()))
    final = torch.tensor([0.5, -0.2, 0.01, 0.02])
    c.add("reference", _rec("final/param/0:attn.bias", "param", final))
    c.add("port", _rec("final/param/0:attn.bias", "param", final + torch.tensor([0, 0, 0.01, -0.01])))
    c.add("golden", _rec("final/param/0:attn.bias", "param", final.double()))
    out = c.results["final/param/0:attn.bias"]
    assert out.verdict is Verdict.PASS, out.reason
    assert "2 element(s) left out" in out.reason
