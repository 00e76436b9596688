"""gluonperf.measure.stats against textbook values and SciPy, and its verdicts on constructed data."""
import math
import random

import pytest
from scipy import stats as sp

from gluonperf.measure import stats
from gluonperf.records import level_text


def test_t_interval_matches_scipy_on_the_log_ratios():
    ratios = [1.10, 1.18, 1.05, 1.22, 1.12, 1.09]
    logs = [math.log(r) for r in ratios]
    low, high = sp.t.interval(0.95, len(logs) - 1, loc=sum(logs) / len(logs), scale=sp.sem(logs))
    i = stats.ratio_interval(ratios)
    assert i.estimate == pytest.approx(sp.gmean(ratios))
    assert (i.low, i.high) == (pytest.approx(math.exp(low)), pytest.approx(math.exp(high)))
    assert i.n == 6 and i.level == 0.95


def test_textbook_t_quantile():
    # 3 rounds: t(0.975, 2) = 4.303 (every table); logs 0, 0.1, 0.2: mean 0.1, sd 0.1
    i = stats.ratio_interval([1.0, math.exp(0.1), math.exp(0.2)])
    assert math.log(i.high) - 0.1 == pytest.approx(4.303 * 0.1 / math.sqrt(3), rel=1e-3)


def test_one_round_has_no_interval_and_failed_rounds_are_left_out():
    i = stats.ratio_interval([1.3, None])
    assert i.n == 1 and i.low == 0 and math.isinf(i.high)
    assert stats.verdict(i).word == "inconclusive"
    with pytest.raises(ValueError):
        stats.ratio_interval([None])
    with pytest.raises(ValueError):
        stats.ratio_interval([1.0, -2.0])


def test_median_interval_uses_binomial_order_statistics():
    # n = 10: the 95% distribution-free interval of the median is x(2)..x(9), coverage 97.85%
    i = stats.median_interval(list(range(1, 11)))
    assert (i.low, i.high, i.estimate) == (2, 9, 5.5)
    assert i.level == pytest.approx(1 - 2 * sp.binom.cdf(1, 10, 0.5))
    assert math.isinf(stats.median_interval([1, 2, 3, 4, 5]).high)  # 5 rounds cannot give 95%


def test_minmax_level():
    assert stats.minmax_level(3) == 0.75 and stats.minmax_level(5) == pytest.approx(0.9375)


def test_welch_interval_matches_scipy_without_a_noise_floor():
    old = [1.00, 1.05, 0.98, 1.02, 1.01]
    new = [0.90, 0.93, 0.88, 0.91, 0.95]
    i = stats.two_sample_interval(old, new, noise_floor=0)
    a, b = [math.log(x) for x in old], [math.log(x) for x in new]
    res = sp.ttest_ind(a, b, equal_var=False)
    if not hasattr(res, "confidence_interval"):  # Python 3.8's last SciPy, 1.10, is older
        pytest.skip("SciPy's Welch interval (ttest_ind(...).confidence_interval) needs SciPy 1.11")
    low, high = res.confidence_interval(0.95)
    assert (math.log(i.low), math.log(i.high)) == (pytest.approx(low), pytest.approx(high))
    # the noise floor widens it: two runs measured apart cannot see the drift between them
    j = stats.two_sample_interval(old, new, noise_floor=0.08)
    assert j.low < i.low and j.high > i.high and j.estimate == pytest.approx(i.estimate)


def test_verdicts():
    faster = stats.ratio_interval([1.20, 1.22, 1.18, 1.21, 1.19])
    assert stats.verdict(faster).word == "faster" and "95% CI" in stats.verdict(faster).text
    slower = stats.ratio_interval([0.80, 0.82, 0.79, 0.81])
    assert stats.verdict(slower).word == "slower"
    same = stats.ratio_interval([1.00, 1.01, 0.99, 1.00, 1.005, 0.995])
    v = stats.verdict(same)
    assert v.word == "same" and v.text.startswith("same within +-5%")
    # significant but within the threshold, and the interval reaching past it: not "faster"
    small = stats.ratio_interval([1.03, 1.06, 1.02, 1.05, 1.04])
    assert stats.verdict(small).word in ("same", "inconclusive") and stats.verdict(small).word != "faster"
    wide = stats.ratio_interval([1.3, 0.9, 1.15])
    v = stats.verdict(wide)
    assert v.word == "inconclusive" and v.rounds_needed and v.rounds_needed > 3 and "would settle it" in v.text


def test_a_verdict_states_the_level_its_family_holds_and_reckons_rounds_at_its_own():
    """An interval built at 99% so that several hold 95% together is said at 95%; the rounds that
    would settle it are reckoned at 99%, the level more rounds would be judged at."""
    wide = stats.ratio_interval([1.3, 0.9, 1.15], 0.99)
    own, said = stats.verdict(wide), stats.verdict(wide, stated_level=0.95)
    assert "99% CI" in own.text and "95% CI" in said.text and said.text.replace("95%", "99%") == own.text
    assert said.rounds_needed == own.rounds_needed == stats.rounds_needed(wide)
    assert stats.verdict(stats.ratio_interval([1.20, 1.22, 1.18], 0.99), stated_level=0.95).text.startswith(
        "faster: 1.20x (95% CI ")
    with pytest.raises(ValueError):  # a level the interval does not reach is never stated
        wide.ci_text(0.995)


def test_rounds_needed_is_enough_by_its_own_rule():
    wide = stats.ratio_interval([1.12, 1.02, 1.20, 1.08])
    need = stats.rounds_needed(wide, 0.05)
    # with the same spread and estimate, `need` rounds decide, need - 1 do not
    half = lambda n: sp.t.ppf(0.975, n - 1) * wide.sd_log / math.sqrt(n)
    target = abs(math.log(wide.estimate))
    assert half(need) < target <= half(need - 1)


def test_a_a_noise_is_rarely_called_a_change():
    """200 A/A comparisons of 8 rounds with 10% noise: the 95% interval excludes 1 in about 5%
    of them, and past a 5% threshold fewer still."""
    rng = random.Random(7)
    called = sum(stats.verdict(stats.ratio_interval([math.exp(rng.gauss(0, 0.10)) for _ in range(8)])).word
                 in ("faster", "slower") for _ in range(200))
    assert called <= 10


def test_a_known_effect_is_covered():
    rng = random.Random(11)
    covered = 0
    for _ in range(200):
        i = stats.ratio_interval([0.909 * math.exp(rng.gauss(0, 0.05)) for _ in range(8)])
        covered += i.low <= 0.909 <= i.high
    assert 180 <= covered <= 200  # 95% nominal


def test_speedup_fields_pair_the_repeats():
    base = [2.0, 4.0, 2.0]
    fast = [1.0, 2.0, 1.0]  # twice as fast in every repeat, however the machine drifted
    f = stats.speedup_fields(base, fast)
    assert f["speedup"] == pytest.approx(2.0) and f["speedup_ci_low"] == pytest.approx(2.0)
    assert f["speedup_n"] == 3 and f["verdict"] == "faster"
    with pytest.raises(ValueError):
        stats.paired_ratios([1.0], [1.0, 2.0])


def test_an_interval_too_wide_for_a_float_ends_at_infinity():
    """2 rounds far apart at a level near 1 (a candidate out after 2 rounds under tune's plan): the
    upper end is past what a float holds; it is inf (and the interval unreadable), not an error."""
    iv = stats.ratio_interval([0.6, 1.3], 1 - 0.01 * 0.05 / 2)
    assert iv.high == math.inf and iv.low < 1e-300
    assert not stats.readable(iv)


def test_a_level_spent_over_looks_is_written_rounded_down():
    # tune's confirmation of the recipe printed "99.0155% CI": the level as a reader reads it, and
    # rounded down, so that what is written still holds
    assert [level_text(x) for x in (0.95, 0.99, 0.995, 0.990155, 0.98759, 0.9999)] == \
        ["95%", "99%", "99.5%", "99%", "98.7%", "99.9%"]
    iv = stats.Interval(1.34, 1.04, 1.72, 5, level=0.990155)
    assert iv.describe() == "1.34x (99% CI 1.04-1.72, 5 rounds)"


def test_an_interval_too_wide_to_read_is_not_written_out_in_any_verdict():
    """Issue 70, item 5: the record's verdict_text (JSON, the report, tune --model's line) said
    '0.72x (95% CI 2.27e-16-2.29e+15, 2 rounds)'."""
    wide = stats.ratio_interval([0.6, 0.86], 1 - 0.05 / 12 * 0.01)
    v = stats.verdict(wide, stated_level=0.95)
    assert v.word == "inconclusive" and "0.72x (2 rounds: too few for an interval)" in v.text, v.text
    assert "e+" not in v.text and "e-" not in v.text
    one = stats.ratio_interval([1.3])
    assert one.describe() == "1.30x (1 round: too few for an interval)"
    assert stats.ratio_interval([1.1, 1.12, 1.09]).describe().startswith("1.10x (95% CI ")


def test_rounds_needed_is_the_first_n_the_t_interval_decides_at():
    """rounds_needed starts at the normal's answer (no n below it can do) and steps up: the same n as
    counting from the rounds there are."""
    import random
    rng = random.Random(3)
    for _ in range(200):
        n, sd, est = rng.randint(2, 12), rng.uniform(0.01, 0.5), rng.uniform(0.8, 1.4)
        level = rng.choice([0.95, 0.99, 1 - 0.05 / 12])
        iv = stats.Interval(est, 0.5, 2.0, n, level, "t", sd)
        target = abs(math.log(est)) if abs(math.log(est)) > math.log(1.05) else math.log(1.05) - abs(math.log(est))
        brute = next((k for k in range(max(n, 2), stats.MAX_ROUNDS + 1)
                      if stats.t_quantile(0.5 + level / 2, k - 1) * sd / math.sqrt(k) < target), None)
        assert stats.rounds_needed(iv) == (brute if target > 0 else None)
