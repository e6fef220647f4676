"""Every name the CN5xx/CN6xx/CN8xx rules write into code exists (in torch or the stdlib)."""

from __future__ import annotations

import importlib

import pytest

from cuda2neuron.kinds import catalog


def _emitted():
    for code, rule in catalog().items():
        if code.startswith(("CN5", "CN6", "CN8")):
            for name in rule.emits:
                yield pytest.param(name, id=f"{code}-{name}")


@pytest.mark.parametrize("qualified", list(_emitted()))
def test_emitted_name_exists(qualified):
    module, _, rest = qualified.partition(".")
    obj = importlib.import_module(module)
    for part in rest.split("."):
        obj = getattr(obj, part)
    assert obj is not None
