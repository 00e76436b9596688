"""A scaling prediction judged against the measured step, as a 'predict-check' record.

- `judge(predicted, samples)`: the interval of measured / predicted from the measured step's
  samples, and the verdict: within 25%, outside, or inconclusive (`WITHIN`).
- `crowding(...)`: what a job on this machine asks of its cores: how many threads want a core
  at once, and whether they outnumber the cores (`scaling.model.oversubscribed`).
- `check(...)`: the record of one prediction and its measurement, with the judgement in words
  (`CHECK_COLUMNS`: the columns of its table).

Nothing here parses arguments, prints or runs anything.
"""
from . import model as scaling_model
from ..records import result

CHECK_COLUMNS = ["scheme", "workers", "servers", "devices", "threads", "runnable", "per_device_batch", "t1_s", "t2_s",
                 "predicted_step_s", "measured_step_s", "measured_step_low_s", "measured_step_high_s", "measured_n",
                 "measured_over_predicted", "measured_over_predicted_ci_low", "measured_over_predicted_ci_high",
                 "within_25pct"]
WITHIN = 0.25  # a prediction is judged within 25% of the measured step


def judge(predicted_step, measured_steps, within=WITHIN, what="steps"):
    """The measured step (`measured_steps`: its samples, seconds) against a prediction, with
    the spread of the measurement: the interval of measured / predicted (a t interval on the
    log step times, stats.ratio_interval, scaled by the prediction). Within `within` when the
    whole interval lies inside 1 -+ within, outside when it lies wholly outside, otherwise
    inconclusive. Returns (measured step interval, ratio interval, True / False / None, text)."""
    from ..measure import stats
    measured = stats.ratio_interval(measured_steps)
    ratio = stats.Interval(measured.estimate / predicted_step, measured.low / predicted_step,
                           measured.high / predicted_step, measured.n, measured.level, measured.method,
                           measured.sd_log)
    lo, hi = 1 - within, 1 + within
    verdict = True if lo <= ratio.low and ratio.high <= hi else (
        False if ratio.high < lo or ratio.low > hi else None)
    word = {True: "within", False: "outside", None: "inconclusive against"}[verdict]
    return measured, ratio, verdict, "%s %g%%: measured/predicted %s" % (word, 100 * within,
                                                                        ratio.describe(what=what))


def crowding(workers, threads, helpers, cores):
    """What a job on this machine asks of its cores: the workers' compute threads (workers x
    OpenMP threads) and `helpers`, the processes or threads that must run at every exchange
    beside them ({'servers': 2, 'scheduler': 1}, {'Horovod background threads': 2}). Returns
    the fields of a check: runnable (all of them), cores, oversubscribed
    (`scaling_model.oversubscribed`: then the cores bound the compute, `scaling_model.cores_bound_s`)
    and `crowding_note`, the words its judgement adds when so."""
    runnable = workers * threads + sum(helpers.values())
    over = scaling_model.oversubscribed(runnable, cores)
    parts = ["%d compute thread%s" % (workers * threads, "s" * (workers * threads != 1))] + \
        ["%d %s" % (n, what) for what, n in helpers.items() if n]
    note = ("oversubscribed: %d threads want a core at once on %d cores (%s)" % (runnable, cores, ", ".join(parts))
            if over else None)
    return dict(runnable=runnable, cores=cores, oversubscribed=over, crowding_note=note)


def check(scheme, predicted_step, measured_steps, batch, what="steps", **fields):
    """A 'predict-check' record: `judge`'s verdict on the prediction, with the `crowding`
    fields' note, when there is one, added to the judgement."""
    measured, ratio, within, text = judge(predicted_step, measured_steps, what=what)
    err = scaling_model.relative_error(predicted_step, measured.estimate)
    note = fields.pop("crowding_note", None)
    if note:
        text += "; " + note
    return result("predict-check", "%s %s" % (scheme, ",".join("%s=%s" % kv for kv in fields.items()
                                                             if kv[0] in ("devices", "workers", "servers")
                                                             and kv[1] is not None)),
                  scheme=scheme, predicted_step_s=predicted_step, measured_step_s=measured.estimate,
                  measured_step_low_s=measured.low, measured_step_high_s=measured.high, measured_n=measured.n,
                  measured_samples_s=list(measured_steps), **ratio.fields("measured_over_predicted"),
                  predicted_images_per_s=batch / predicted_step, measured_images_per_s=batch / measured.estimate,
                  error=err, within_25pct=within, judgement=text, **fields)
