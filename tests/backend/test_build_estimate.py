"""The cold build's time estimate (the number its progress lines show next to the elapsed time)."""

from __future__ import annotations

import pytest

from cuda2neuron.backend import _build


@pytest.mark.parametrize(("cores", "load", "low", "high"), [
    # Measured on the 2-core machine: 37 s idle, 203 s at load average 14 (docs/backend.md).
    pytest.param(2, 0.0, 30, 45, id="two-idle-cores-measured-37s"),
    pytest.param(2, 14.0, 140, 230, id="two-cores-load-14-measured-203s"),
    pytest.param(16, 0.0, 20, 30, id="many-cores-bounded-by-three-jobs"),
    pytest.param(1, 0.0, 70, 120, id="one-core"),
])
def test_estimate_follows_measurements(cores, load, low, high):
    seconds, why = _build.estimate_build_seconds(cores, load)
    assert low <= seconds <= high, seconds
    assert f"{cores} core" in why and f"load {load:.1f}" in why


def test_estimate_grows_with_load():
    times = [_build.estimate_build_seconds(2, load)[0] for load in (0, 2, 6, 12, 24)]
    assert times == sorted(times) and times[-1] > 3 * times[0]


def test_ticker_reports_elapsed_against_estimate(monkeypatch):
    import time

    lines: list[str] = []
    monkeypatch.setattr(_build, "_TICK_S", 0.01)
    t0 = time.perf_counter()
    ticker = _build._Ticker(lines.append, t0, estimate=1000.0)
    ticker.start()
    time.sleep(0.1)
    ticker.stop()
    over = _build._Ticker(lines.append, t0 - 5000.0, estimate=10.0)
    over.start()
    time.sleep(0.1)
    over.stop()
    assert any("of an estimated 1000 s" in line for line in lines), lines
    assert any("longer than the estimated 10 s" in line for line in lines), lines
