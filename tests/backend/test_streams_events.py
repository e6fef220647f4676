"""Synchronous streams and events; Event.elapsed_time measures host time."""

from __future__ import annotations

import time

import torch


def test_stream_context_makes_it_current(neuron):
    s = neuron.Stream()
    assert s.device.type == "neuron"
    default = neuron.default_stream()
    assert neuron.current_stream() == default
    with neuron.stream(s):
        assert neuron.current_stream() == s
        x = torch.ones(3, device="neuron") * 2
    assert neuron.current_stream() == default
    s.synchronize()
    assert s.query()
    torch.testing.assert_close(x.cpu(), torch.full((3,), 2.0))


def test_set_stream(neuron):
    s = neuron.Stream()
    neuron.set_stream(s)
    try:
        assert neuron.current_stream() == s
    finally:
        neuron.set_stream(neuron.default_stream())


def test_event_elapsed_time(neuron):
    start, end = neuron.Event(enable_timing=True), neuron.Event(enable_timing=True)
    start.record()
    time.sleep(0.05)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    assert 40.0 <= start.elapsed_time(end) <= 1000.0


def test_synchronize_and_wait(neuron):
    s1, s2 = neuron.Stream(), neuron.Stream()
    e = s1.record_event()
    s2.wait_event(e)
    s2.wait_stream(s1)
    neuron.synchronize()
    torch.accelerator.synchronize()
