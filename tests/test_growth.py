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
    text = found.text(20 * 2 ** 30)
    assert text.startswith("grows: 2") and "MB per 1,000 steps (95% CI" in text and "more steps" in text


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
    assert found.last_bytes - found.first_bytes > 70 * MIB or at not in (150, 250)  # the jump is in the levels


@pytest.mark.parametrize("at", [150, 250])
def test_a_cache_filled_once_is_said_as_a_one_off_step_with_its_size_and_steps(at):
    jumps = [(at + i, 16 * MIB) for i in range(5)]
    found = growth.fit(series(400, rate=300, jumps=jumps), warmup=80)
    assert 75 * MIB < found.jump_bytes < 85 * MIB and found.jump_from <= at < at + 4 <= found.jump_to
    assert found.jump_to - found.jump_from <= 3 * found.block  # where it happened, within a few blocks
    assert "stepped up once by" in found.text() and found.fields()["one_off_step_bytes"] == found.jump_bytes


def test_a_leak_and_a_flat_job_have_no_one_off_step():
    for rate in (300, 25_000):
        for seed in range(20):
            found = growth.fit(series(400, rate=rate, seed=seed), warmup=80)
            assert found.jump_bytes is None, (rate, seed, found.text())


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
    """Increments of a random walk with drift are independent: the interval covers the drift
    about 95% of the time. 400 walks."""
    drift, covered, grows = 2_000, 0, 0
    for seed in range(400):
        found = growth.fit(series(330, rate=drift, noise=20_000, walk=True, seed=seed), warmup=30)
        covered += found.low <= drift <= found.high
        grows += found.verdict == "grows"
    assert covered >= 366, covered  # a coverage of 95% falls below 366 of 400 (3.1 SD) once in a thousand
    assert grows <= 20  # the drift is below the floor: 'grows' needs the interval's lower end above it


def test_too_few_steps_is_inconclusive_and_says_what_a_verdict_needs():
    found = growth.fit(series(30, rate=1e6), warmup=3)
    assert found.verdict == "inconclusive" and found.low is None and found.level is None
    assert "too few steps" in found.why and "50 steps after the warm-up" in found.why
    assert found.text().startswith("inconclusive: too few steps")
    assert growth.fit([], warmup=0).verdict == "inconclusive"


def test_the_trimmed_interval_is_tukey_mclaughlins_as_scipy_computes_it():
    rng = random.Random(1)
    values = [rng.expovariate(1 / 20_000) for _ in range(31)]
    mean, low, high, g = growth.trimmed_interval(values)
    assert g == 6 and low < mean < high  # a fifth of 31 from each end
    x = sorted(values)
    assert mean == pytest.approx(sum(x[6:25]) / 19)
    mstats = pytest.importorskip("scipy.stats").mstats
    ci = mstats.trimmed_mean_ci(values, limits=(g / 31, g / 31), alpha=0.05)  # g from each end
    assert (low, high) == pytest.approx(tuple(ci))
    assert growth.trimmed_interval([1.0] * 8)[1:] == (None, None, 0)  # fewer than MIN_INCREMENTS: no interval
    assert growth.trimmed_interval([5.0] * 12)[1:3] == (5.0, 5.0)


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
