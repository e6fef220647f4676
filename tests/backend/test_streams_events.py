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
    """Work queued on one stream is complete and visible on another after wait_event /
    wait_stream, and every synchronize returns with nothing pending (execution is synchronous)."""
    s1, s2 = neuron.Stream(), neuron.Stream()
    with neuron.stream(s1):
        x = torch.arange(4.0, device="neuron") * 3
    e = s1.record_event()
    assert e.query() and s1.query()
    assert s2.wait_event(e) is None and s2.wait_stream(s1) is None
    with neuron.stream(s2):
        y = x + 1
    assert neuron.synchronize() is None and torch.accelerator.synchronize() is None
    assert s1.query() and s2.query() and e.query()
    assert neuron.current_stream() == neuron.default_stream()
    torch.testing.assert_close(y.cpu(), torch.tensor([1.0, 4.0, 7.0, 10.0]))
