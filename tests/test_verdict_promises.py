"""Every promise of docs/verdicts.md, each in a test that fails when the code breaks it.

The page is what users rely on when they read a verdict; each test quotes the promise it
holds. Constructed intervals and readings only: nothing here times anything.
"""
import math

import pytest

from gluonperf.measure import machine, stats
from gluonperf.measure.comparison import compare
from gluonperf.records import Result


def quiet(rounds):
    """`rounds` watching a machine nobody else uses: no round runs again for the load of other work
    (the suite's own, beside the test)."""
    from gluonperf.tuning.simulate import QuietMachine
    rounds.machine = QuietMachine
    return rounds


def interval(estimate, low, high, n=8, sd_log=0.05):
    return stats.Interval(estimate, low, high, n, stats.LEVEL, "t", sd_log)


# --- "never gives a ratio without its 95% interval and the number of rounds behind it" ---

@pytest.mark.parametrize("ratios", [[1.2, 1.21, 1.19, 1.2], [1.0, 1.001, 0.999], [1.3, 0.8, 1.1], [0.7, 0.71]])
def test_every_verdict_states_its_interval_and_rounds(ratios):
    v = stats.verdict(stats.ratio_interval(ratios))
    assert "95% CI" in v.text and "%d rounds" % len(ratios) in v.text, v.text


def test_a_record_carries_every_field_the_page_lists():
    """`<key>`, `<key>_ci_low`, `<key>_ci_high`, `<key>_n`, `<key>_level`, `verdict`,
    `verdict_text`, `threshold`, and `rounds_needed` when inconclusive."""
    decided = stats.speedup_fields([2.0, 2.1, 2.05, 2.0], [1.0, 1.05, 1.0, 1.02])
    assert {"speedup", "speedup_ci_low", "speedup_ci_high", "speedup_n", "speedup_level", "verdict",
            "verdict_text", "threshold"} <= set(decided) and decided["verdict"] == "faster"
    undecided = stats.speedup_fields([1.0, 1.0, 1.0], [0.8, 1.3, 1.0])
    assert undecided["verdict"] == "inconclusive" and "rounds_needed" in undecided


# --- the interval: exp(mean +- t(0.975, n-1) sd / sqrt(n)) of the log ratios, from 2 rounds on ---

def test_the_interval_is_the_t_interval_on_the_mean_log_ratio():
    logs = [0.02, 0.10, -0.04, 0.07, 0.01]
    i = stats.ratio_interval([math.exp(x) for x in logs])
    mean = sum(logs) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 4)
    half = 2.7764451051977987 * sd / math.sqrt(5)  # t(0.975, 4)
    assert (i.estimate, i.low, i.high) == (pytest.approx(math.exp(mean)), pytest.approx(math.exp(mean - half)),
                                          pytest.approx(math.exp(mean + half)))


def test_the_t_interval_exists_from_two_rounds_and_one_round_has_none():
    two = stats.ratio_interval([1.1, 1.2])
    assert 0 < two.low < two.estimate < two.high < math.inf
    one = stats.ratio_interval([1.1])
    assert one.low == 0 and one.high == math.inf


def test_the_median_interval_needs_six_rounds_and_is_then_min_to_max():
    """'it needs at least 6 rounds to reach 95% at all ... with 6 rounds it is min..max'."""
    assert stats.median_interval([1.0, 1.1, 1.2, 1.3, 1.4]).high == math.inf
    six = stats.median_interval([1.3, 1.0, 1.2, 1.5, 1.1, 1.4])
    assert (six.low, six.high) == (1.0, 1.5) and six.level >= 0.95


def test_min_max_is_an_interval_at_one_minus_two_to_the_one_minus_n():
    """'75% for 3 rounds, 94% for 5'."""
    assert [stats.minmax_level(n) for n in (3, 5)] == [0.75, 0.9375]


# --- the verdict ------------------------------------------------------------------------

def test_faster_or_slower_needs_the_interval_to_exclude_one():
    """An estimate far past the threshold with an interval that reaches 1 is not a change."""
    assert stats.verdict(interval(1.5, 0.99, 2.2)).word == "inconclusive"
    assert stats.verdict(interval(1 / 1.5, 1 / 2.2, 1.01)).word == "inconclusive"
    assert stats.verdict(interval(1.5, 1.01, 2.2)).word == "faster"
    assert stats.verdict(interval(1 / 1.5, 1 / 2.2, 0.99)).word == "slower"


def test_faster_or_slower_needs_the_estimate_past_the_threshold():
    """An interval that excludes 1 with an estimate within +-m is not a change (asv's rule:
    both the factor and the test)."""
    for est, lo, hi in ((1.04, 1.01, 1.07), (1 / 1.04, 1 / 1.07, 1 / 1.01)):
        assert stats.verdict(interval(est, lo, hi), 0.05).word not in ("faster", "slower")
    assert stats.verdict(interval(1.06, 1.01, 1.11), 0.05).word == "faster"


def test_same_needs_the_whole_interval_within_the_threshold():
    """'same within +-m only when the whole interval lies within 1/(1+m)..1+m': never 'same'
    on too little evidence, however close the estimate is to 1."""
    assert stats.verdict(interval(1.0, 0.90, 1.11)).word == "inconclusive"
    assert stats.verdict(interval(1.0, 0.96, 1.051)).word == "inconclusive"
    assert stats.verdict(interval(1.0, 1 / 1.051, 1.04)).word == "inconclusive"
    assert stats.verdict(interval(1.0, 1 / 1.05, 1.05)).word == "same"
    assert stats.verdict(interval(1.01, 0.97, 1.03), 0.05).text.startswith("same within +-5%")
    assert stats.verdict(stats.ratio_interval([1.0])).word == "inconclusive"  # one round: 0..inf


def test_inconclusive_says_how_many_rounds_would_settle_it():
    """The smallest n for which t(0.975, n-1) sd / sqrt(n) is below the distance to decide:
    |log estimate| past the threshold, log(1+m) minus it within."""
    from scipy import stats as sp
    for est in (1.08, 1.01):
        i = interval(est, est / 1.2, est * 1.2, n=4, sd_log=0.1)
        v = stats.verdict(i, 0.05)
        d = abs(math.log(est))
        target = d if d > math.log(1.05) else math.log(1.05) - d
        half = lambda n: sp.t.ppf(0.975, n - 1) * 0.1 / math.sqrt(n)
        assert v.word == "inconclusive" and half(v.rounds_needed) < target <= half(v.rounds_needed - 1)
        assert "about %d rounds would settle it" % v.rounds_needed in v.text


# --- tune ---------------------------------------------------------------------------------

def _tune_results(figures, threshold=0.05, rounds=None):
    """summarize's Results of rounds whose figures are given per candidate (the first the baseline),
    each candidate's ratio in a round its figure over the baseline's."""
    from gluonperf.tuning import schedule
    from gluonperf.tuning.candidates import Candidate
    from gluonperf.tuning.rounds import Rounds
    names = list(figures)
    cands = [Candidate(n, (("OMP_NUM_THREADS", str(i + 1)),), (("model", "mlp"),)) for i, n in enumerate(names)]
    base = figures[names[0]]
    table = schedule.Table(cands, rounds or Rounds(fixed=len(base)), "lever", threshold,
                           figures={n: list(v) for n, v in figures.items()},
                           ratios={n: [v / b for v, b in zip(figures[n], base)] for n in names}, start={})
    return schedule.summarize(table)


def test_tune_judges_each_candidate_at_the_bonferroni_level():
    """'a candidate is kept only when its interval at level 1 - 0.05/k ... lies above 1'."""
    base = [100.0, 102.0, 98.0, 101.0, 99.0]
    figures = {"base": base, "a": [v * 1.10 for v in base], "b": [v * 1.2 for v in base],
               "c": [v * 1.0 for v in base]}
    results = {r.name: r.metrics for r in _tune_results(figures)}
    assert all(results[n]["ratio_level"] == pytest.approx(1 - 0.05 / 3) for n in "abc")


def test_tune_keeps_the_faster_candidate_with_the_highest_estimate():
    """'of several such, the one with the highest estimate': of two candidates both faster beyond the
    noise, a noisy 1.30x is kept over a steady 1.20x; and a candidate whose interval reaches 1 is
    never kept, however high its estimate."""
    from gluonperf.tuning.schedule import winner
    base = [100.0] * 6
    noise = [0.90, 1.1, 0.95, 1.08, 0.93, 1.05]
    figures = {"base": base, "steady": [120.0, 121.0, 119.0, 120.5, 119.5, 120.0],
               "noisy": [130.0 * x for x in noise]}
    results = _tune_results(figures)
    by = {r.name: r.metrics for r in results}
    assert by["noisy"]["ratio"] > by["steady"]["ratio"] and by["steady"]["verdict"] == by["noisy"]["verdict"] == \
        "faster" and by["noisy"]["ratio_ci_low"] < by["steady"]["ratio_ci_low"]
    assert winner(results).name == "noisy"
    alone = _tune_results({"base": base, "noisy": [130.0 * x for x in (0.6, 1.4, 0.7, 1.3, 0.65, 1.35)]})
    assert next(r for r in alone if r.name == "noisy").metrics["ratio"] > 1.05
    assert winner(alone) is None


def test_a_candidate_that_cannot_beat_a_faster_one_leaves():
    """'Once one candidate of a lever has left as faster, another that could not be kept instead of it
    ... leaves too'."""
    from gluonperf.tuning import schedule
    from gluonperf.tuning.candidates import Candidate
    from gluonperf.tuning.rounds import Rounds
    speed = {"b": 100.0, "big": 150.0, "small": 108.0}  # 1.12x settles as faster at the same look as 1.5x
    wobble = iter([1.0, 1.01, 0.99, 1.02, 0.98] * 40)
    table = schedule.Table([Candidate("b"), Candidate("big"), Candidate("small")], quiet(Rounds()), "x", start={})
    schedule.interleave(table, lambda c: (speed[c.name] * next(wobble), None))
    by = {r.name: r.metrics for r in schedule.summarize(table)}
    assert by["big"]["stopped"] == "faster" and by["small"]["stopped"] == schedule.OUTRUN
    assert by["small"]["rounds"] <= by["big"]["rounds"] + 1 and schedule.winner(list(
        schedule.summarize(table))).name == "big"


def test_rounds_exhaustive_stops_on_width_only():
    """'exhaustive: at least 5 rounds, then more until every candidate's interval is within +-5%
    of its estimate, at most 30 rounds'."""
    from gluonperf.tuning.rounds import Rounds
    slow = Rounds(exhaustive=True)
    tight = {"a": [1.5, 1.5001, 1.4999, 1.5, 1.5]}
    wide = {"a": [1.0, 1.3, 0.8, 1.2, 0.9]}
    assert slow.more(4, tight, 0) is True  # the minimum
    assert slow.more(5, tight, 0) is False  # tight: stop, significant or not
    assert slow.more(5, {"a": [1.0, 1.0001, 0.9999, 1.0, 1.0]}, 0) is False
    assert slow.more(5, wide, 0) is True and slow.more(29, wide, 10 ** 6) is True  # no budget
    assert slow.more(30, wide, 0) is False


def test_rounds_auto_stops_each_candidate_once_settled():
    """'auto: each candidate until its verdict is settled (faster or slower beyond the noise, or
    unable to reach the smallest speed-up worth a change)': never before the first look (3 rounds),
    never after the plan's last round, and the interval of the look where it stopped spends only
    that look's share of the error rate (wider than the fixed-n interval of the same rounds)."""
    from gluonperf.tuning.rounds import Rounds
    from gluonperf.measure import sequential
    auto = Rounds()
    clear = [1.5, 1.52, 1.49]
    assert auto.settle(clear[:2], 1) is None and auto.settle(clear, 1) == sequential.FASTER
    assert auto.settle([0.5, 0.52, 0.49], 1) in (sequential.SLOWER, sequential.CANNOT_PAY, sequential.FUTILE)
    assert auto.settle([1.0, 1.01, 0.99], 1) in (sequential.CANNOT_PAY, sequential.FUTILE)
    noisy = [1.1, 0.9, 1.3, 0.8, 1.25, 0.95, 1.2, 0.85, 1.3, 0.9] * 3
    assert auto.settle(noisy[:auto.maximum], 1) == sequential.PLAN_DONE
    seq, fixed = auto.interval(clear, 1), stats.ratio_interval(clear)
    assert seq.low < fixed.low and seq.high > fixed.high and seq.level > 0.95


def test_the_plans_intervals_cover_together_at_its_level():
    """'All the intervals a candidate shows over its looks then cover its true ratio together with
    probability 1 - alpha': on sequences simulated apart from the plan's own (another seed), the
    share whose interval misses the truth at one look or more is alpha, where Bonferroni over the
    looks gave less, 3.7% (the boundaries pay for the looks' correlation, not for their number)."""
    import numpy as np
    from gluonperf.measure import sequential
    plan, paths = sequential.Plan(8, 0.05), 40_000
    logs = np.random.default_rng(11).normal(0.0, 0.3, size=(paths, plan.rounds))
    missed = np.zeros(paths, dtype=bool)
    for n in range(sequential.BEHIND_LOOK, plan.rounds + 1):
        mean, sd = logs[:, :n].mean(axis=1), logs[:, :n].std(axis=1, ddof=1)
        half = stats.t_quantile(0.5 + plan.level(n) / 2, n - 1) * sd / np.sqrt(n)
        missed |= np.abs(mean) > half
    se = np.sqrt(0.05 * 0.95 / paths)
    assert abs(missed.mean() - 0.05) < 4 * se, missed.mean()
    assert [plan.level(n) > 0.95 for n in range(1, 9)] == [True] * 8
    assert plan.level(8) < plan.level(3)  # the power family spends most at the last looks


# --- compare ------------------------------------------------------------------------------

def _run(value, samples=None, **more):
    m = {"median_s": value, **more}
    if samples is not None:
        m["samples_s"] = samples
    return Result("bench", "x", m)


def test_compare_calls_a_regression_only_when_significant_and_past_fail_above():
    """'compare exits 1 only on a regression that is both significant and past --fail-above'."""
    old = [_run(v) for v in (1.00, 1.01, 0.99, 1.00)]
    worse = [_run(v) for v in (1.50, 1.51, 1.49, 1.50)]
    assert compare(old, worse, fail_above=0.10)[0].metrics["status"] == "regression"
    assert compare(old, worse, fail_above=0.60)[0].metrics["status"] == "worse"  # significant, not past
    noisy = [_run(v) for v in (0.8, 1.6, 1.1, 1.5)]
    assert compare(old, noisy, fail_above=0.10)[0].metrics["status"] == "inconclusive"  # past, not significant


def test_compare_uses_the_evidence_the_files_hold():
    """Several runs per file: Welch's t on the runs, with the drift that runs saved one after
    another share (stats.SESSION_FLOOR), so however steady its runs two files are never
    'same within +-5%' on their own; one run a side: a floor by call time; --ab: the
    per-pair ratios."""
    old = [_run(v) for v in (1.00, 1.01, 0.99)]
    new = [_run(v) for v in (0.60, 0.61, 0.59)]
    r = compare(old, new)[0].metrics
    assert r["evidence"].startswith("3 and 3 runs") and r["status"] == "improved" and r["ratio_n"] == 3
    steady = compare([_run(1.0 + i * 1e-4) for i in range(8)], [_run(1.0 + i * 1e-4) for i in range(8)])[0].metrics
    assert steady["status"] == "inconclusive" and steady["ratio_ci_high"] >= 1 + stats.SESSION_FLOOR
    pairs = {("bench", "x"): [(1.0, 0.8), (1.1, 0.88), (0.9, 0.72)]}
    r = compare([_run(1.0)], [_run(0.8)], pairs=pairs)[0].metrics
    assert r["evidence"] == "alternating pairs" and r["ratio"] == pytest.approx(1.25) and r["ratio_n"] == 3


# --- an unstable machine ---------------------------------------------------------------------

@pytest.mark.parametrize("start,rounds,baseline,unstable", [
    ({"others_busy_cores": 0.6, "steal_share": 0.0}, [], [], True),
    ({"others_busy_cores": 0.4, "steal_share": 0.0}, [], [], False),
    (None, [{"others_busy_cores": 0.7, "steal_share": 0.0}, {"others_busy_cores": 0.4, "steal_share": 0.0}], [],
     True),
    (None, [{"others_busy_cores": 0.1, "steal_share": 0.11}], [], True),
    (None, [{"others_busy_cores": 0.1, "steal_share": 0.09}], [], False),
    (None, [], [1.0, 1.26], True),
    (None, [], [1.0, 1.24], False),
])
def test_the_machine_counts_as_unstable_past_the_pages_lines(start, rounds, baseline, unstable):
    """'Past 0.5 busy cores, 10% steal or a baseline that moved 25%' ... 'the intervals are
    made at 99% instead of 95%'."""
    warnings = machine.judge(rounds, start, baseline)
    assert bool(warnings) is unstable, warnings
    assert stats.level_for(not warnings) == (0.99 if unstable else 0.95)
