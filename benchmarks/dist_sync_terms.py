"""Is predict's dist_sync miss noise, or a term the model lacks?

    python benchmarks/dist_sync_terms.py --rounds 3 --json dist_terms.json

`predict --validate dist` predicts 2 workers and 1 server on loopback as
t1 + t2: t1 the one-worker step measured alone (kvstore device, one OpenMP thread, as each
of 2 workers gets on 2 cores), t2 `scaling_model.ps_sync_s` with the per-message cost
calibrated on 1 worker and 1 server. The model assumes the two workers compute side by side
as fast as one alone (compute_units = cores // threads = 2). Per round, interleaved, this
measures with the same training command (`scaling.runs.train_argv`, tiny LeNet):
  - `alone`: one worker, kvstore device, OMP_NUM_THREADS=1 (the model's t1);
  - `two at once`: two such workers started together, no communication (t1 as it is
    when two processes share the cores);
  - `dist 1x1`: dist_sync, 1 worker 1 server (the calibration run);
  - `dist 2x1`: dist_sync, 2 workers 1 server (the configuration that missed).
Each run trains --repeats timed epochs after an untimed one; an epoch's step is one sample.
Records: each run's step with its 95% interval over its epochs, the prediction, and per
round the ratios dist 2x1 / predicted and two-at-once / alone with their intervals over the
rounds (gluonperf.measure.stats.ratio_interval): the first says whether the miss is real, the
second how much of it the shared cores explain. docs/suites.md has the result.
"""
import argparse
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gluonperf.cli import common as cli  # noqa: E402
from gluonperf.measure import stats


def run_round(model, batch, steps, repeats, nbytes, keys, lnk, base_env, tmp, timeout, r):
    """One round: {name: [step per epoch]} of the four runs, plus the round's prediction."""
    from gluonperf.scaling import model as scaling_model, runs
    from gluonperf.runtime.threads import physical_cores
    one = dict(base_env, OMP_NUM_THREADS="1")

    def single(tag):
        path = os.path.join(tmp, "single-%s-%d.json" % (tag, r))
        runs.run_train(runs.train_argv(model, batch, batch * steps, repeats + 1,
                                       ["--ctx", "cpu0", "--kvstore", "device", "--json", path]),
                       one, timeout, "1 worker alone")
        return runs.epoch_steps(path, batch)

    def dist(workers):
        path = os.path.join(tmp, "dist-%d-%d.json" % (workers, r))
        argv = [sys.executable, "-m", "gluonperf.launch", "-n", str(workers), "-s", "1", "--timeout",
                str(timeout), "--"] + runs.train_argv(model, batch, batch * steps * workers, repeats + 1,
                                                      ["--ctx", "cpu0", "--kvstore", "dist_sync",
                                                       "--json", path])
        runs.run_train(argv, one, timeout + 30, "dist_sync %d workers 1 server" % workers)
        return runs.epoch_steps(path, batch * workers)

    out = {"alone": single("alone"), "load": os.getloadavg()[0]}
    pair, errors = {}, []

    def worker(tag):
        try:
            pair[tag] = single(tag)
        except Exception as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    out["two at once"] = [max(a, b) for a, b in zip(pair["a"], pair["b"])]  # a sync step waits for the slower
    out["dist 1x1"] = dist(1)
    out["dist 2x1"] = dist(2)
    t1 = runs.mean_step(out["alone"])
    per_message = max(lnk.latency_s, (runs.mean_step(out["dist 1x1"]) - t1 - 2.0 * nbytes / lnk.Bps)
                      / (2 * keys))
    ps = scaling_model.measured_link(lnk.GBps, per_message, name="loopback via ps-lite", scope="network",
                                     shared=True)
    units = max(1, physical_cores() // 1)
    t2 = scaling_model.ps_sync_s(nbytes, 2, 1, ps, keys=keys, compute_units=units)
    return out, scaling_model.compute_s(t1, 2, units) + t2, t2


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="lenet")
    p.add_argument("--batch", type=cli.positive_int, default=64, help="images per worker (default: %(default)s)")
    p.add_argument("--steps", type=cli.positive_int, default=10, help="steps per epoch (default: %(default)s)")
    p.add_argument("--repeats", type=cli.positive_int, default=4, help="timed epochs per run (default: %(default)s)")
    p.add_argument("--rounds", type=cli.positive_int, default=3, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--json", metavar="PATH")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.check_outputs(args)
    cli.guard_command(args, "benchmarks/dist_sync_terms.py", stall_timeout=0)
    from gluonperf.runtime import guard
    from gluonperf.scaling import parts, runs
    from gluonperf.records import Result
    nbytes, keys, _ = parts.gradient_bytes(args.model)
    lnk = parts.loopback_link(nbytes)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MXNET_OMP", "DMLC_"))}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base_env["PYTHONPATH"] = os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)
    rounds = []
    with guard.temp_dir(prefix="gluonperf-dist-terms-") as tmp:
        for r in range(args.rounds):
            rounds.append(run_round(args.model, args.batch, args.steps, args.repeats, nbytes, keys, lnk, base_env,
                                    tmp, 240, r))
            print("round %d done" % (r + 1), file=sys.stderr, flush=True)
    results = []
    for name in ("alone", "two at once", "dist 1x1", "dist 2x1"):
        samples = [s for out, _, _ in rounds for s in out[name]]
        iv = stats.ratio_interval(samples)
        results.append(Result("dist-terms", name, {"step_s": iv.estimate, "step_low_s": iv.low,
                                                    "step_high_s": iv.high, "epochs": iv.n,
                                                    "round_steps_s": [out[name] for out, _, _ in rounds]}))
    mean = runs.mean_step
    miss = [mean(out["dist 2x1"]) / pred for out, pred, _ in rounds]
    shared = [mean(out["two at once"]) / mean(out["alone"]) for out, _, _ in rounds]
    rest = [mean(out["dist 2x1"]) / (pred - mean(out["alone"]) + mean(out["two at once"]))
            for out, pred, _ in rounds]
    for name, ratios, text in (
            ("dist 2x1 / predicted", miss, "the miss"),
            ("two at once / alone", shared, "the shared cores' slowdown of t1"),
            ("dist 2x1 / (predicted with t1 from two at once)", rest, "what is left")):
        # (each round's 1-minute load average, read after its first run, is in round_load)
        iv = stats.ratio_interval(ratios)
        results.append(Result("dist-terms", name, dict(iv.fields("ratio"), round_ratios=ratios, what=text,
                                                       predicted_step_s=[pred for _, pred, _ in rounds],
                                                       t2_s=[t2 for _, _, t2 in rounds],
                                                       round_load=[out["load"] for out, _, _ in rounds],
                                                       verdict=stats.verdict(iv, words=("above", "below")).text)))
    cli.emit(results, args, (), columns=["name", "step_s", "step_low_s", "step_high_s", "epochs", "ratio",
                                         "ratio_ci_low", "ratio_ci_high", "ratio_n", "verdict"],
             title="dist_sync on loopback, %s, %d images per worker, %d rounds of %d epochs x %d steps: steps "
                   "(geometric mean of the epochs, 95%% CI) and per-round ratios (95%% CI over rounds)"
                   % (args.model, args.batch, args.rounds, args.repeats, args.steps))


if __name__ == "__main__":
    cli.run(main, "benchmarks/dist_sync_terms.py")
