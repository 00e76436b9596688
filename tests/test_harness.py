import statistics
import time

import mxnet as mx
import numpy as np
import pytest

from gluonperf.measure.harness import Benchmark, Measurement, environment, measure, measure_interleaved
from gluonperf.measure.memory import MemorySampler


@pytest.mark.alone
def test_timer_includes_queued_work():
    """A region that only queues a product must still be billed for it. Rounds alternate the
    same product timed to a sync outside any region (the reference) and a region that only
    queues it; the per-round ratio region / reference is judged by its interval: the region
    holds the work (the interval above 0.5), where a Benchmark that did not wait at its end
    would bill only the queueing (a ratio near 0.001). Paired rounds, so a machine whose
    speed drifts (the 2-core Intel Xeon of 2026-11-24 moved 2x within 90 s; a cold first call
    against a warm region failed once in CI) moves both sides of a ratio alike."""
    from gluonperf.measure.stats import paired_ratios, ratio_interval
    x = mx.nd.random.uniform(shape=(1000, 1000))
    mx.nd.dot(x, x).wait_to_read()  # the first call is cold (OpenBLAS's threads, first page faults)
    reference, region, queued = [], [], []
    for _ in range(7):
        start = time.perf_counter()
        mx.nd.dot(x, x).wait_to_read()
        reference.append(time.perf_counter() - start)
        with Benchmark("queued") as b:
            queue_start = time.perf_counter()
            y = mx.nd.dot(x, x)
            queued.append(time.perf_counter() - queue_start)
        region.append(b.seconds)
    assert statistics.median(queued) < statistics.median(reference) / 2, \
        "nd.dot did not return before finishing; the test cannot tell"
    billed = ratio_interval(paired_ratios(region, reference))  # region / reference, per round
    assert billed.low > 0.5, billed.describe()
    assert y.shape == (1000, 1000)


@pytest.mark.alone
def test_benchmark_excludes_work_queued_before_the_block():
    x = mx.nd.random.uniform(shape=(1500, 1500))
    mx.nd.waitall()
    start = time.perf_counter()
    for _ in range(4):
        mx.nd.dot(x, x).wait_to_read()
    work = time.perf_counter() - start
    for _ in range(4):
        mx.nd.dot(x, x)  # queued, not waited for
    with Benchmark("empty") as b:
        pass
    assert b.seconds < work / 4


def test_verbose_prints_like_the_book(capsys):
    with Benchmark("Workloads are queued.", verbose=True):
        pass
    out = capsys.readouterr().out
    assert out.startswith("Workloads are queued. time: ") and out.rstrip().endswith(" sec")


def test_statistics_match_the_samples():
    samples = (0.5, 0.1, 0.3, 0.2, 0.4, 0.9)
    m = Measurement("m", samples, number=10)
    assert m.median == statistics.median(samples)
    assert m.mean == pytest.approx(np.mean(samples))
    assert m.min == 0.1 and m.max == 0.9
    q1, q3 = np.percentile(samples, [25, 75])
    assert m.iqr == pytest.approx(q3 - q1)
    assert m.noisy  # the spread is far over 10% of the median
    summary = m.summary()
    assert summary["median_s"] == m.median and summary["repeats"] == 6 and summary["number"] == 10


def test_tight_samples_are_not_noisy():
    m = Measurement("m", (1.0, 1.01, 0.99, 1.0, 1.02))
    assert not m.noisy
    assert Measurement("one", (2.0,)).iqr == 0


def test_measure_counts_warmup_repeats_and_number():
    calls = []
    m = measure(lambda: calls.append(1), warmup=2, repeat=3, number=4)
    assert len(calls) == 2 + 3 * 4
    assert len(m.samples) == 3 and m.number == 4


def test_measure_reports_per_call_time():
    """Per call, not per repeat, with bounds that hold at any speed or load: time.sleep never
    returns early, so each call takes 10 ms or more; and every timed region lies inside the call,
    so the repeats' samples times the calls in each fit in its wall time (a sample per repeat,
    4x the call, overshoots it). An upper bound of 50 ms per call raced a loaded machine's
    sleeps, and with number == repeat it could not tell the one from the other."""
    start = time.perf_counter()
    m = measure(lambda: time.sleep(0.01), repeat=3, number=4, warmup=1)
    wall = time.perf_counter() - start
    assert len(m.samples) == 3 and m.number == 4
    assert min(m.samples) >= 0.009, m.samples  # the clocks' resolution aside
    assert sum(m.samples) * m.number <= wall, (m.samples, wall)


def test_interleaved_measures_every_variant():
    seen = []
    ticks = []
    out = measure_interleaved({"a": lambda: seen.append("a"), "b": lambda: seen.append("b")},
                              warmup=0, repeat=4, number=1, progress=lambda: ticks.append(1))
    assert set(out) == {"a", "b"} and len(ticks) == 8
    assert seen[:2] == ["a", "b"] and seen[2:4] == ["b", "a"]  # order rotates between repeats


def test_memory_sampler_sees_an_allocation_freed_inside_the_region(monkeypatch):
    """The block lives until the sampler's thread has read the RSS 10 times while it was there
    (counted through memory.rss, which it reads), then goes before the region ends. A 0.1 s
    sleep instead counted on the thread waking every 10 ms meanwhile, which a loaded machine
    need not do; a sampler that only looked before and after never gets there."""
    import threading
    from gluonperf.measure import memory
    size = 300 * 2 ** 20
    real_rss, alive, reads, ten = memory.rss, threading.Event(), [], threading.Event()

    def counted_rss():
        value = real_rss()
        if alive.is_set():
            reads.append(value)
            if len(reads) >= 10:
                ten.set()
        return value
    monkeypatch.setattr(memory, "rss", counted_rss)
    with Benchmark("alloc", memory=True) as b:
        block = np.ones(size // 8)  # touched, so resident
        alive.set()
        assert ten.wait(60), "the sampler read the RSS %d times in 60 s" % len(reads)
        alive.clear()
        del block
    usage = b.memory
    assert usage.rss_growth >= 0.8 * size
    assert usage.rss_after - usage.rss_before < 0.5 * size  # it was freed before the end
    assert usage.samples >= 12  # the first, 10 or more of the block, the last


def test_memory_sampler_sees_mxnet_allocation():
    sampler = MemorySampler(interval=0.001).start()
    a = mx.nd.ones((64, 2 ** 20))  # 256 MiB
    a.wait_to_read()
    time.sleep(0.05)
    usage = sampler.stop()
    assert usage.rss_growth >= 200 * 2 ** 20
    del a


def test_environment_records_the_build():
    env = environment([mx.cpu(0), mx.cpu(1)])
    assert env["mxnet"] == mx.__version__
    assert env["contexts"] == ["cpu(0)", "cpu(1)"]
    assert "MKLDNN" in env["features"] or env["features"]
    assert env["cpu_count"] >= 1 and isinstance(env["env"], dict)
    assert isinstance(env["cpu_model"], str) and env["cpu_model"]


def _touch_fresh_pages(nbytes):
    """Map `nbytes` of fresh anonymous memory (no huge pages) and write one byte per 4 KiB
    page: each write is one minor page fault."""
    import mmap
    m = mmap.mmap(-1, nbytes)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        m.madvise(mmap.MADV_NOHUGEPAGE)
    for offset in range(0, nbytes, 4096):
        m[offset] = 1
    m.close()


def test_benchmark_counts_the_page_faults_of_fresh_memory():
    with Benchmark("fresh") as fresh:
        _touch_fresh_pages(8 << 20)
    with Benchmark("nothing new") as quiet:
        pass
    assert fresh.minor_faults >= 2048 - 64, fresh.minor_faults  # 8 MiB of 4 KiB pages
    assert quiet.minor_faults < 64, quiet.minor_faults


def test_measurement_gives_page_faults_per_call():
    m = measure(lambda: _touch_fresh_pages(4 << 20), warmup=0, repeat=3, number=2)
    assert len(m.faults) == 3
    assert 1024 - 32 <= m.summary()["minor_faults"] <= 2 * 1024, m.faults  # 4 MiB per call, not per repeat
    assert "minor_faults" not in Measurement("given", (0.1, 0.2)).summary()  # none counted, none reported


def test_the_yardstick_is_timed_in_every_repeat_beside_the_variants():
    from gluonperf.measure.harness import YARDSTICK, measure, measure_interleaved
    calls = []
    got = measure_interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, warmup=0, repeat=3,
                              yardstick=True)
    assert set(got) == {"a", "b"} and calls.count("a") == 3
    for m in got.values():
        assert len(m.yardstick) == 3 and all(t > 0 for t in m.yardstick)
        row = m.summary()
        assert row["yardstick_samples_s"] == list(m.yardstick) and row["yardstick_s"] > 0
    assert got["a"].yardstick == got["b"].yardstick  # one yardstick per repeat, shared
    assert "yardstick_s" not in measure(lambda: None, repeat=2).summary()
    with pytest.raises(ValueError, match="yardstick's label"):
        measure_interleaved({YARDSTICK: lambda: None}, yardstick=True)
