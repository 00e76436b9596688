"""Why LeNet's fused rung is slower than static on a CPU where oneDNN runs its convolutions as
GEMMs: static, fused, and fused without the ReLU folding, built and loaded as `infer` serves
them, timed in interleaved rounds; and oneDNN's own time for each primitive of a warm call.
The reading is docs/precision_ladder.md's "Why fused can be slower than static".

    python benchmarks/fused_relu.py [--rounds 30] [--threads 2,1] [--batch 64] [--json OUT]

The fused graph without the ReLU folding is built in a process of its own with
MXNET_DISABLE_MKLDNN_FUSE_CONV_RELU=1 and MXNET_DISABLE_MKLDNN_FUSE_FC_ELTWISE=1 (MXNet reads
them when the pass runs, from the environment it started with). Each thread count is timed in
a fresh process (OpenMP reads OMP_NUM_THREADS once): a round calls each graph `--calls` times at
`--batch`, the graphs' order rotating, and keeps each one's median; a variant's ratio to static
is the geometric mean of the per-round ratios with its 95% t interval (gluonperf.measure.stats).
Per-primitive times come from a process with DNNL_VERBOSE=1 (gluonperf.inference.primitives),
the median of each primitive's time over `--verbose-calls` warm calls.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NO_RELU = {"MXNET_DISABLE_MKLDNN_FUSE_CONV_RELU": "1", "MXNET_DISABLE_MKLDNN_FUSE_FC_ELTWISE": "1"}
VARIANTS = ("static", "fused", "fused, no ReLU folding")


def build(folder, rungs):
    """Build `rungs` of LeNet (its seeded weights) into `folder`; the Rungs as text, in a file."""
    import mxnet as mx
    from gluonperf.inference import ladder
    built = ladder.prepare(ladder.model_source("lenet"), rungs, mx.cpu(), folder)
    with open(os.path.join(folder, "rungs.json"), "w") as f:
        json.dump({r.name: r.to_text() for r in built}, f)


def time_rounds(rungs, batch, calls, rounds):
    """{variant: [median seconds a call, a round]} of the loaded rungs, interleaved."""
    import mxnet as mx
    from gluonperf.inference import ladder
    nets = {name: ladder.load(ladder.Rung.from_text(text), mx.cpu()) for name, text in rungs.items()}
    x = mx.nd.array(__import__("numpy").random.RandomState(0).rand(batch, 1, 28, 28).astype("float32"))
    for net in nets.values():  # warm: plan the graph, create the primitives, reorder the weights
        for _ in range(3):
            net(x).wait_to_read()
    out = {name: [] for name in nets}
    names = list(nets)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                nets[name](x).wait_to_read()
                times.append(time.perf_counter() - start)
            out[name].append(statistics.median(times))
    return out


def verbose_calls(rungs, batch, calls):
    """{variant: [(kind, impl, post_ops, median ms)]} of a warm call's primitives (DNNL_VERBOSE=1
    is set by the parent): each call's verbose lines caught in a file, `calls` calls; and the
    same for fused on an input of zeros ('fused, zeros': every ReLU input the same sign)."""
    import mxnet as mx
    from gluonperf.inference import ladder
    x = mx.nd.array(__import__("numpy").random.RandomState(0).rand(batch, 1, 28, 28).astype("float32"))
    out = {name: _verbose(ladder.load(ladder.Rung.from_text(text), mx.cpu()), x, calls) for name, text in rungs.items()}
    out["fused, zeros"] = _verbose(ladder.load(ladder.Rung.from_text(rungs["fused"]), mx.cpu()), x * 0, calls)
    return out


def _verbose(net, x, calls):
    """[(kind, impl, post_ops, median ms)] of `net`'s primitives over `calls` warm calls on `x`."""
    from gluonperf.inference import primitives
    for _ in range(3):
        net(x).wait_to_read()
    per_call = []
    for _ in range(calls):
        with tempfile.TemporaryFile(mode="w+") as f:
            sys.stdout.flush()
            saved = os.dup(1)
            os.dup2(f.fileno(), 1)
            try:
                net(x).wait_to_read()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            f.seek(0)
            per_call.append(primitives.executed(f.read().splitlines()))
    return [(p.kind, p.impl, list(p.post_ops), statistics.median(c[i].ms for c in per_call))
            for i, p in enumerate(per_call[0])]


def child(argv, env, what):
    """Run this file with `argv` in a fresh process; raise with its last line when it fails."""
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *argv], env=env, capture_output=True,
                          text=True, timeout=3600)
    if done.returncode:
        raise SystemExit("%s failed: %s" % (what, (done.stderr.strip().splitlines() or ["no message"])[-1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=10, help="calls a round per graph (their median is kept)")
    parser.add_argument("--threads", default="2,1", help="OMP_NUM_THREADS of each timing process")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--verbose-calls", type=int, default=200)
    parser.add_argument("--json", help="the records (one per variant and thread count), JSON lines")
    parser.add_argument("--part", choices=("build", "time", "verbose"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "build":
        return build(args.folder, ["static", "fused"] if "MXNET_DISABLE_MKLDNN_FUSE_CONV_RELU" not in os.environ
                     else ["fused"])
    if args.part in ("time", "verbose"):
        with open(args.folder) as f:
            rungs = json.load(f)
        result = (time_rounds(rungs, args.batch, args.calls, args.rounds) if args.part == "time"
                  else verbose_calls(rungs, args.batch, args.verbose_calls))
        with open(args.out, "w") as f:
            json.dump(result, f)
        return None
    return measure(args)


def measure(args):
    from gluonperf.measure import stats
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MXNET_", "DNNL_", "KMP_"))}
    with tempfile.TemporaryDirectory() as tmp:
        plain, no_relu = os.path.join(tmp, "plain"), os.path.join(tmp, "no-relu")
        child(["--part", "build", "--folder", plain], env, "building static and fused")
        child(["--part", "build", "--folder", no_relu], dict(env, **NO_RELU), "building fused without ReLU folding")
        rungs = {}
        for folder, names in ((plain, {"static": "static", "fused": "fused"}),
                              (no_relu, {"fused": "fused, no ReLU folding"})):
            with open(os.path.join(folder, "rungs.json")) as f:
                built = json.load(f)
            rungs.update({label: built[name] for name, label in names.items()})
        with open(os.path.join(tmp, "rungs.json"), "w") as f:
            json.dump(rungs, f)
        records = []
        for threads in [int(t) for t in args.threads.split(",")]:
            out = os.path.join(tmp, "t%d.json" % threads)
            child(["--part", "time", "--folder", os.path.join(tmp, "rungs.json"), "--out", out, "--rounds",
                   str(args.rounds), "--calls", str(args.calls), "--batch", str(args.batch)],
                  dict(env, OMP_NUM_THREADS=str(threads)), "timing at %d threads" % threads)
            verbose = os.path.join(tmp, "v%d.json" % threads)
            child(["--part", "verbose", "--folder", os.path.join(tmp, "rungs.json"), "--out", verbose, "--batch",
                   str(args.batch), "--verbose-calls", str(args.verbose_calls)],
                  dict(env, OMP_NUM_THREADS=str(threads), DNNL_VERBOSE="1"), "oneDNN's verbose at %d threads" % threads)
            with open(out) as f:
                medians = json.load(f)
            with open(verbose) as f:
                prims = json.load(f)
            records.append({"variant": "fused, zeros", "threads": threads, "batch": args.batch,
                            "primitives_ms": prims["fused, zeros"]})
            print("%d thread%s  fused, on an input of zeros: %s" % (threads, "s" if threads > 1 else " ", ", ".join(
                "%s %.3f ms" % (kind, ms) for kind, _, _, ms in prims["fused, zeros"])), flush=True)
            for name in VARIANTS:
                ratio = stats.ratio_interval([s / b for s, b in zip(medians["static"], medians[name])])
                records.append({"variant": name, "threads": threads, "batch": args.batch, "rounds": args.rounds,
                                "calls_per_round": args.calls, "median_call_s": statistics.median(medians[name]),
                                "speed_vs_static": ratio.estimate, "ci_low": ratio.low, "ci_high": ratio.high,
                                "primitives_ms": prims[name]})
                print("%d thread%s  %-24s median %.3f ms  vs static %.2fx (95%% CI %.2f-%.2f, %d rounds)" % (
                    threads, "s" if threads > 1 else " ", name, 1e3 * statistics.median(medians[name]), ratio.estimate,
                    ratio.low, ratio.high, args.rounds), flush=True)
                for kind, impl, post, ms in prims[name]:
                    print("    %-12s %-22s %-16s %.3f ms" % (kind, impl, "+".join(post), ms))
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
