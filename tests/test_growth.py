"""gluonperf.measure.growth: the growth of memory per step, its interval and verdict, on series
made here (no MXNet): a leak, a flat job, a cache filled once, random walks with and without a
drift. The random series are seeded: each test computes the same thing on every machine."""
import random

import pytest

from gluonperf.measure import growth

MIB = 2 ** 20
PAGE = 4096


def series(steps, rate=0.0, noise=64 * 1024, jumps=(), seed=0, walk=False, start=300 * MIB):
    """(step, bytes) a step: `rate` bytes a step, page-rounded; noise around a level (or a random
    walk of that step size with `walk`); `jumps`: (step, bytes) added from that step on."""
    rng = random.Random(seed)
    out, level = [], 0.0
    for s in range(steps):
        if walk:
            level += rng.gauss(0, noise)
            value = start + rate * s + level
        else:
            value = start + rate * s + rng.gauss(0, noise)
        value += sum(size for at, size in jumps if s >= at)
        out.append((s, PAGE * round(value / PAGE)))
    return out


def test_a_leak_grows_and_its_interval_holds_the_rate():
    found = growth.fit(series(400, rate=25_000), warmup=80)
    assert found.verdict == "grows"
    assert found.low <= 25_000 <= found.high and found.low > growth.FLOOR_BYTES
    assert found.n == 31 and found.block == 10 and found.steps == 320 and found.level >= 0.95
    fields = found.fields(available=20 * 2 ** 30)
    assert fields["growth_verdict"] == "grows"
    assert fields["growth_mb_per_1000_steps"] == pytest.approx(found.rate * 1000 / 1e6)
    assert fields["steps_to_exhaust"] == pytest.approx(20 * 2 ** 30 / found.rate)
    assert fields["steps_to_exhaust_low"] < fields["steps_to_exhaust"] < fields["steps_to_exhaust_high"]
    assert found.text(20 * 2 ** 30).startswith("grows: 25") and "more steps" in found.text(20 * 2 ** 30)


def test_a_flat_job_is_flat():
    found = growth.fit(series(400, rate=300), warmup=80)
    assert found.verdict == "flat" and found.high < growth.FLOOR_BYTES
    assert "steps_to_exhaust" not in found.fields(available=2 ** 30)
    assert found.text().startswith("flat: ")


@pytest.mark.parametrize("at", [85, 150, 250, 380, 396])
def test_a_cache_filled_once_is_not_a_leak_wherever_it_fills(at):
    """80 MiB over 5 steps (16 MiB a step), then nothing more, after the warm-up."""
    jumps = [(at + i, 16 * MIB) for i in range(5)]
    found = growth.fit(series(400, rate=300, jumps=jumps), warmup=80)
    assert found.verdict == "flat", found.text()
    assert found.last_bytes - found.first_bytes > 70 * MIB or at >= 390  # the jump is in the levels


def test_a_leak_with_a_cache_filled_once_still_grows():
    jumps = [(200 + i, 16 * MIB) for i in range(5)]
    found = growth.fit(series(400, rate=25_000, jumps=jumps), warmup=80)
    assert found.verdict == "grows" and found.low <= 25_000 <= found.high


def test_a_slow_leak_is_inconclusive_until_enough_steps_are_counted():
    few = growth.fit(series(120, rate=6_000, noise=256 * 1024), warmup=24)
    many = growth.fit(series(4000, rate=6_000, noise=256 * 1024), warmup=800)
    assert few.verdict == "inconclusive" and "more steps would settle it" in few.text()
    assert many.verdict == "grows"


def test_the_interval_covers_the_drift_of_random_walks():
    """Increments of a random walk with drift are independent: the sign test's interval covers
    the drift at least 95% of the time (it is exact up to the binomial's steps). 200 walks."""
    drift, covered, grows = 2_000, 0, 0
    for seed in range(200):
        found = growth.fit(series(330, rate=drift, noise=20_000, walk=True, seed=seed), warmup=30)
        covered += found.low <= drift <= found.high
        grows += found.verdict == "grows"
    assert covered >= 186, covered  # 93% of 200: a real coverage of 95% falls below it 1 time in 20 or less
    assert grows <= 10  # the drift is below the floor: 'grows' needs the interval's lower end above it


def test_too_few_steps_is_inconclusive_and_says_what_a_verdict_needs():
    found = growth.fit(series(30, rate=1e6), warmup=3)
    assert found.verdict == "inconclusive" and found.low is None and found.level is None
    assert "too few steps" in found.why and "35 steps after the warm-up" in found.why
    assert found.text().startswith("inconclusive: too few steps")
    assert growth.fit([], warmup=0).verdict == "inconclusive"


def test_the_sign_interval_is_the_order_statistics_of_the_binomial():
    values = list(range(30))
    mid, low, high, level = growth.sign_interval(values)
    assert mid == 14.5 and (low, high) == (9, 20) and 0.95 <= level < 0.96  # x(10)..x(21), 1-based
    assert growth.sign_interval([1, 2, 3, 4, 5])[1:] == (None, None, None)  # 5 values cannot reach 95%
    scipy_stats = pytest.importorskip("scipy.stats")
    if hasattr(scipy_stats, "quantile_test"):  # SciPy 1.12 on: the same exact interval
        ci = scipy_stats.quantile_test(values).confidence_interval(0.95)
        assert (ci.low, ci.high) == (low, high)


def test_warmup_is_a_fifth_of_the_run_or_what_the_caller_knows():
    assert growth.warmup_steps(400) == 80 and growth.warmup_steps(400, at_least=100) == 100
    assert growth.warmup_steps(10) == 2


def test_a_series_of_any_length_keeps_bounded_evenly_spread_samples():
    s = growth.StepSeries(cap=100)
    for step in range(1000):
        if s.wants(step):
            s.append(step, step * 10)
    assert len(s) <= 100 and s.stride == 16
    steps = [st for st, _ in s.samples()]
    assert steps[0] == 0 and steps[-1] >= 1000 - 16 and len({b - a for a, b in zip(steps, steps[1:])}) == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        growth.fit(series(100), floor=0)
    with pytest.raises(ValueError):
        growth.fit([(0, float("nan"))] * 50)
    with pytest.raises(ValueError):
        growth.StepSeries(cap=10)
