"""RNG: torch.manual_seed seeds neuron exactly like CPU; per-device generators and states."""

from __future__ import annotations

import pytest
import torch

DRAWS = {
    "rand": lambda d, g=None: torch.rand(5, 3, device=d, generator=g),
    "randn": lambda d, g=None: torch.randn(7, device=d, generator=g),
    "randint": lambda d, g=None: torch.randint(0, 100, (6,), device=d, generator=g),
    "normal_": lambda d, g=None: torch.empty(4, device=d).normal_(2.0, 3.0, generator=g),
    "bernoulli": lambda d, g=None: torch.bernoulli(torch.full((8,), 0.5, device=d), generator=g),
    "randperm": lambda d, g=None: torch.randperm(10, device=d, generator=g),
    "multinomial": lambda d, g=None: torch.multinomial(torch.ones(6, device=d), 3, generator=g),
}


@pytest.mark.parametrize("name", list(DRAWS))
def test_same_seed_same_numbers_as_cpu(name):
    torch.manual_seed(1234)
    ref = DRAWS[name]("cpu")
    torch.manual_seed(1234)
    out = DRAWS[name]("neuron")
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), ref)


@pytest.mark.parametrize("name", ["rand", "randn", "randperm"])
def test_explicit_generator(name):
    g_cpu = torch.Generator().manual_seed(7)
    g_dev = torch.Generator(device="neuron").manual_seed(7)
    assert g_dev.device == torch.device("neuron", 0)
    first = DRAWS[name]("neuron", g_dev)
    torch.testing.assert_close(first.cpu(), DRAWS[name]("cpu", g_cpu))
    # the device generator advanced exactly like the CPU one
    torch.testing.assert_close(DRAWS[name]("neuron", g_dev).cpu(), DRAWS[name]("cpu", g_cpu))


def test_dropout_mask_matches_cpu():
    x = torch.ones(64, 32)
    torch.manual_seed(3)
    ref = torch.nn.functional.dropout(x, 0.3, training=True)
    torch.manual_seed(3)
    out = torch.nn.functional.dropout(x.to("neuron"), 0.3, training=True)
    assert torch.equal(out.cpu() == 0, ref == 0)
    torch.testing.assert_close(out.cpu(), ref)


def test_device_draws_leave_the_cpu_generator_alone():
    torch.manual_seed(5)
    torch.randn(3, device="neuron")
    torch.nn.functional.dropout(torch.ones(10, device="neuron"), 0.5)
    after = torch.rand(3)
    torch.manual_seed(5)
    torch.testing.assert_close(after, torch.rand(3))


def test_get_set_rng_state_replays(neuron):
    neuron.manual_seed(11)
    state = neuron.get_rng_state()
    a = torch.randn(5, device="neuron")
    neuron.set_rng_state(state)
    b = torch.randn(5, device="neuron")
    torch.testing.assert_close(a.cpu(), b.cpu())


def test_per_device_generators(neuron):
    neuron.manual_seed_all(9)
    a = torch.rand(4, device="neuron:0")
    b = torch.rand(4, device="neuron:1")
    torch.testing.assert_close(a.cpu(), b.cpu())  # same seed on both devices
    neuron.manual_seed(1)  # only the current device
    assert neuron.initial_seed() == 1
    with neuron.device(1):
        assert neuron.initial_seed() == 9


def test_seed_all_changes_state(neuron):
    neuron.manual_seed_all(0)
    a = torch.rand(3, device="neuron")
    neuron.seed_all()
    neuron.seed()
    b = torch.rand(3, device="neuron")
    assert not torch.equal(a.cpu(), b.cpu())
