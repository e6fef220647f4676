"""Every name the CN4xx rules write into code exists in the installed torch."""

from __future__ import annotations

import importlib

import pytest

from cuda2neuron.kinds import catalog


def _emitted():
    for code, rule in catalog().items():
        if code.startswith("CN4"):
            for name in rule.emits:
                yield pytest.param(name, id=f"{code}-{name}")


EMITTED = list(_emitted())


def test_the_family_declares_what_it_writes():
    # CN401 and CN403 write torch.distributed / torch.accelerator calls for --target accelerator.
    assert {p.values[0] for p in EMITTED} >= {
        "torch.distributed.get_default_backend_for_device",
        "torch.distributed.is_backend_available",
        "torch.accelerator.current_accelerator",
    }


@pytest.mark.parametrize("qualified", EMITTED)
def test_emitted_name_exists(qualified):
    pytest.importorskip("torch")
    module, _, rest = qualified.partition(".")
    obj = importlib.import_module(module)
    for part in rest.split("."):
        obj = getattr(obj, part)
    assert callable(obj)
