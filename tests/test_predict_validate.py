"""`predict --validate` judges a prediction against the measured step with its spread: the
measured side is several samples (the timed steps, or timed epochs of a dist_sync run), and
"within 25%" holds only when the whole 95% interval of measured/predicted lies in 0.75..1.25
(outside when it lies wholly outside; otherwise inconclusive). (Issue 36; the other tests of
predict are in test_predict.py.)"""
import json

import pytest

from gluonperf.experiments import scaling_checks
from gluonperf.measure import stats


def test_judge_needs_the_whole_interval_inside_or_outside():
    tight = [0.0100, 0.0101, 0.0099, 0.0100, 0.0102]  # a step of 10 ms, 1% spread
    measured, ratio, within, text = scaling_checks.judge(0.0105, tight)
    iv = stats.ratio_interval(tight)
    assert (measured.estimate, measured.low, measured.high, measured.n) == (iv.estimate, iv.low, iv.high, 5)
    assert (ratio.estimate, ratio.low, ratio.high) == pytest.approx((iv.estimate / 0.0105, iv.low / 0.0105,
                                                                     iv.high / 0.0105))
    assert within is True and text.startswith("within 25%: measured/predicted 0.96x (95% CI ")
    assert scaling_checks.judge(0.0070, tight)[2] is False  # measured 1.43x the prediction, all of its interval
    assert scaling_checks.judge(0.0150, tight)[2] is False  # 0.67x
    # the same mean, but a spread that reaches past 1.25: neither within nor outside
    noisy = [0.008, 0.014, 0.009, 0.013, 0.0095]
    _, ratio, within, text = scaling_checks.judge(0.0105, noisy)
    assert ratio.low < 0.75 or ratio.high > 1.25
    assert within is None and text.startswith("inconclusive against 25%: measured/predicted ")
    # an estimate inside 25% is not enough: the old rule (|error| <= 25%) called this one within
    assert abs(scaling_checks.scaling_model.relative_error(0.0105, stats.ratio_interval(noisy).estimate)) <= 0.25
    # one sample has no spread to judge by
    assert scaling_checks.judge(0.01, [0.0101])[2] is None


def test_a_check_record_carries_the_measured_interval(tmp_path):
    r = scaling_checks._check("dist_sync", 0.025, [0.036, 0.035, 0.037, 0.036], 128, what="epochs", devices=1,
                          workers=2, servers=1)
    m = r.metrics
    assert r.bench == "predict-check" and r.name == "dist_sync devices=1,workers=2,servers=1"
    assert m["measured_n"] == 4 and m["measured_step_low_s"] < m["measured_step_s"] < m["measured_step_high_s"]
    assert m["measured_over_predicted"] == pytest.approx(m["measured_step_s"] / 0.025)
    assert m["measured_over_predicted_ci_low"] > 1.25 and m["within_25pct"] is False
    assert m["measured_over_predicted_level"] == 0.95 and m["measured_over_predicted_n"] == 4
    assert m["judgement"].startswith("outside 25%: measured/predicted 1.44x (95% CI ") and "4 epochs" in m["judgement"]
    assert m["error"] == pytest.approx((0.025 - m["measured_step_s"]) / m["measured_step_s"])
    assert m["measured_samples_s"] == [0.036, 0.035, 0.037, 0.036]
    json.dumps(m)  # the record can be written


def test_epochs_after_the_first_are_the_samples(tmp_path):
    path = tmp_path / "t.json"
    rows = [{"bench": "train", "name": "epoch %d" % e, "epoch": e, "train_images_per_s": rate}
            for e, rate in ((1, 100.0), (2, 400.0), (3, 500.0))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert scaling_checks._epoch_steps(str(path), 64) == pytest.approx([64 / 400.0, 64 / 500.0])
    assert scaling_checks._mean_step([0.1, 0.4]) == pytest.approx(0.2)


def test_validate_dist_judges_each_configuration_by_its_epochs(monkeypatch):
    """validate_dist's plumbing with the training runs replaced by records of known rates:
    every launch trains repeats + 1 epochs, the first is dropped, and each configuration is
    judged by the interval of its epochs' steps."""
    seen = []

    def fake_run(argv, env, timeout, what):
        path = argv[argv.index("--json") + 1]
        epochs = int(argv[argv.index("--epochs") + 1])
        batch = int(argv[argv.index("--batch-size") + 1])
        workers = int(argv[argv.index("-n") + 1]) if "-n" in argv else 0
        seen.append((what, epochs, env.get("OMP_NUM_THREADS")))
        step = 0.010 if not workers else 0.012 if workers == 1 else 0.040  # 2 and 4 workers: far slower
        wiggle = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98][:epochs]
        with open(path, "w") as f:
            for e, w in enumerate(wiggle, 1):
                f.write(json.dumps({"bench": "train", "name": "epoch %d" % e, "epoch": e,
                                    "train_images_per_s": batch * max(workers, 1) / (step * w * (3 if e == 1 else 1))})
                        + "\n")
    monkeypatch.setattr(scaling_checks, "_run_train", fake_run)
    out = scaling_checks.validate_dist("lenet", 16, ((2, 1), (4, 1)), steps=2, repeats=4)
    assert all(epochs == 5 for _, epochs, _ in seen), seen
    assert [r.metrics["measured_n"] for r in out] == [4, 4]
    for r in out:
        m = r.metrics
        assert m["measured_step_s"] == pytest.approx(0.040, rel=0.02)  # the first epoch (3x slower) left out
        low, high = m["measured_over_predicted_ci_low"], m["measured_over_predicted_ci_high"]
        assert low <= m["measured_over_predicted"] <= high
        assert m["within_25pct"] in (True, False, None) and m["judgement"]


# `predict --validate devices` as users run it: tests/test_predict.py::test_validate_devices (one run
# checks the prediction's bounds and every field of the judgement).


def test_the_report_reads_the_judgement_with_its_interval():
    from gluonperf.render.page import render_page
    env = {"mxnet": "1.9.1", "cpu_count": 2, "cpu_model": "Test CPU", "env": {}}
    checks = [scaling_checks._check("dist_sync", 0.025, samples, 128, what="epochs", devices=1, workers=2, servers=1)
              for samples in ([0.036, 0.035, 0.037, 0.036], [0.026, 0.025, 0.0255, 0.0252], [0.02, 0.04])]
    html, _ = render_page([("v.json", [(c, env) for c in checks])], "t")
    assert ("checked against runs here, measured/predicted with its interval: within 25% in 1 of 3, outside in 1, "
            "inconclusive in 1") in html
    assert checks[0].metrics["judgement"] in html and checks[2].metrics["judgement"] in html
