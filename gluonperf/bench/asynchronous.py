"""python -m gluonperf.bench async: the chapter's asynchronous-execution experiments."""
from ..cli import common as cli
from . import shared

NAME = "async"
QUICK = ["--demo-size", "64", "--sizes", "8,64", "--iterations", "20", "--repeat", "1"]
RECORDS = ("async",)
TITLE = "Asynchronous execution"
# the tables: queued vs finished, the calls that block, the sweep of sizes (and the report's crossover)
COLUMNS = ["name", "median_s", "iqr_s", "ratio_to_queued"]
CALLS_COLUMNS = ["name", "median_s", "left_s", "blocks"]
SWEEP_COLUMNS = ["name", "iterations", "sync_s", "async_s", "speedup", "speedup_ci_low", "speedup_ci_high", "verdict",
                 "t1_s", "t2_s", "t3_s", "t2_plus_t3_s", "bound", "model_fits", "noisy"]
CROSSOVER_COLUMNS = ["name", "op", "gain_below", "size", "backend_bound_from"]


def add_parser(sub, common):
    p = sub.add_parser(
        "async", parents=[common],
        help="asynchronous execution: queued vs finished, blocking calls, sync vs async loops",
        description="The chapter's asynchronous-execution experiments on the first context of --ctx: "
                    "(1) how long y = nd.dot(x, x).sum() takes to be queued versus to finish; "
                    "(2) which calls block (wait_to_read, waitall, asnumpy, asscalar, print): each is timed "
                    "with the work it leaves behind, and checked against an input held back by a gate "
                    "(a custom operator that waits until released); (3) a loop of y = x + 1 that waits on every "
                    "result versus one that waits once, over a sweep of sizes, with the crossover size "
                    "where async stops paying and the chapter's model N(t1+t2+t3) vs t1+N*t2+t3 solved "
                    "for the front-end cost t1, back-end cost t2 and return cost t3 per iteration.")
    p.add_argument("--demo-size", type=cli.positive_int, default=2000,
                   help="n of the n x n matrix in parts 1 and 2 (default: %(default)s, as in the chapter)")
    p.add_argument("--sizes", type=cli.positive_int_list, default=[10, 32, 100, 316, 1000, 2000],
                   help="comma-separated n of the n x n tensors swept in part 3 (default: 10,32,100,316,1000,2000)")
    p.add_argument("--iterations", type=cli.positive_int, default=None,
                   help="loop iterations per timed loop in part 3 (default: as many as make a synchronous "
                        "loop last about 0.15 s, between 20 and 1000)")
    p.add_argument("--op", choices=["add", "dot"], default="add",
                   help="the loop's operator in part 3: add (y = x + 1, the chapter's) or dot "
                        "(y = nd.dot(x, x)) (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=5,
                   help="timed repeats of each measurement, interleaved (default: %(default)s)")
    shared.add_trace(p)


def measure(args):
    """Check the flags, run the three parts: (records, the context they ran on)."""
    from ..experiments.asynchronous import blocking_calls, queue_vs_finish, sync_vs_async
    from ..measure.timing import Timing
    from ..measure.trace import Trace
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    ctx, trace = ctxs[0], Trace(args.trace)
    if ctx.device_type == "cpu":  # x, x times x, and its copy in host memory; n x n float32 each
        n = max([args.demo_size] + list(args.sizes))
        cli.check_memory(3 * 4 * n * n, "an n x n product at n = %d" % n)
    with cli.progress_bar(2 * args.repeat * len(args.sizes), "async") as bar:
        demo = queue_vs_finish(ctx, args.demo_size, args.repeat, trace)
        calls = blocking_calls(ctx, args.demo_size, args.repeat, trace)
        timing = Timing(repeat=args.repeat, number=args.iterations, progress=bar.update)
        sweep = sync_vs_async(ctx, args.sizes, timing, args.op, trace=trace)
    shared.write_trace(trace)
    return demo + calls + sweep, ctxs[:1]


def parts(records):
    """The records of each part: queued vs finished, blocking calls, the sweep, the crossover."""
    return ([r for r in records if r.name.endswith("queued") or "ratio_to_queued" in r.metrics],
            [r for r in records if "left_s" in r.metrics],
            [r for r in records if "sync_s" in r.metrics],
            [r for r in records if r.name == "crossover"])


def pace(m):
    """Who sets the async loop's pace, from the crossover record's metrics."""
    if m.get("backend_bound_from") is None:
        return "the Python front end set the async loop's pace at every size swept"
    return ("from %sx%s up the operator (t2), not Python (t1), sets the async loop's pace"
            % (m["backend_bound_from"], m["backend_bound_from"]))


def crossover(m):
    """Where async stops paying, from the crossover record's metrics."""
    if m.get("size") is None:
        return "async still gains %d%% or more at the largest size swept" % (100 * m["gain_below"])
    return "from %sx%s up, async gains less than %d%%" % (m["size"], m["size"], 100 * m["gain_below"])


def show(args, records, ctxs):
    """The terminal's three tables and the two readings."""
    demo, calls, rows, (cross,) = parts(records)
    ctx = ctxs[0]
    cli.emit_sections([
        ("y = nd.dot(x, x).sum() with x %dx%d on %s: queued vs finished (median of %d)"
         % (args.demo_size, args.demo_size, ctx, args.repeat), demo, COLUMNS),
        ("which calls block: queue y = nd.dot(x, x) and make the call (median), then time "
         "nd.waitall() (left); blocks: does the call wait while y's input is held back", calls, CALLS_COLUMNS),
        ("%s per iteration on %s: wait_to_read() every iteration (sync) vs waitall() once "
         "(async); t1 front end, t2 back end, t3 return, per iteration" % (cross.metrics["op"], ctx), rows,
         SWEEP_COLUMNS),
    ], args, ctxs, records=records)
    print()
    print("front end vs back end: " + pace(cross.metrics))
    print("crossover: " + crossover(cross.metrics))
    shared.wrote_trace(args.trace)
    shared.warn_noisy(rows)


def section(records):
    """The report's block: the three parts' tables, the sweep drawn, and the readings."""
    from ..render.figures import figure, svg
    from ..render.kinds import (Block, Table, interval_of, noisy_note, paired_interval, report_columns, verdict_of,
                                with_interval)
    demo, calls, sweep, cross = parts(records)
    readings = []
    finished = [r for r in demo if r.metrics.get("ratio_to_queued")]
    if finished:
        queued = next((r for r in demo if r.name.endswith("queued")), None)
        m = dict(finished[0].metrics)
        if queued is not None and interval_of(m, "ratio_to_queued") is None:
            m.update(paired_interval(queued.metrics, m, "ratio_to_queued"))
        readings.append("finishing y takes %s as long as queueing it%s"
                        % (with_interval(m, "ratio_to_queued", "repeats"), verdict_of(m, what="repeats")))
    if cross:
        c = cross[0].metrics
        readings.append(pace(c))
        readings.append(crossover(c) if c.get("size") is None else "crossover: " + crossover(c))
    fig = None
    if sweep:
        f, ax = figure(1, 2, width=8.5, height=3.0)
        sizes = [r.metrics["size"] for r in sweep]
        a = ax[0][0]
        times = [r.metrics[k] * 1e6 for r in sweep for k in ("sync_s", "async_s")]
        a.plot(sizes, [r.metrics["sync_s"] * 1e6 for r in sweep], "o-", label="sync: wait_to_read() every iteration")
        a.plot(sizes, [r.metrics["async_s"] * 1e6 for r in sweep], "s-", label="async: waitall() once")
        a.set_xscale("log")
        if max(times) > 10 * min(times):
            a.set_yscale("log")
        a.set_xlabel("n (x is n x n)")
        a.set_ylabel("us per iteration")
        a.legend(fontsize=8)
        b = ax[0][1]
        b.semilogx(sizes, [r.metrics["speedup"] for r in sweep], "o-", color="tab:green")
        b.axhline(1, color="black", lw=0.8, ls="--")
        if cross and cross[0].metrics.get("size"):
            b.axvline(cross[0].metrics["size"], color="tab:red", ls=":", label="crossover")
            b.legend(fontsize=8)
        b.set_xlabel("n (x is n x n)")
        b.set_ylabel("speedup of async over sync")
        for axis in (a, b):
            axis.grid(True, alpha=0.3)
        fig = svg(f)
    op = (cross[0].metrics.get("op") if cross else None) or (sweep[0].metrics.get("op") if sweep else "")
    tables = [Table(demo, report_columns(COLUMNS, besides={"name": ["size"]}), "queued vs finished (ratio of "
                    "medians; the reading's interval is of the per-repeat ratios)"),
              Table(calls, CALLS_COLUMNS, "which calls block (median_s: the call; left_s: waitall() right after)"),
              Table(sweep, report_columns(SWEEP_COLUMNS, besides={"verdict": ["paired_speedup"]}),
                    "%s per iteration: t1 front end, t2 back end, t3 return" % op),
              Table(cross, CROSSOVER_COLUMNS, "crossover")]
    ctx = records[0].metrics.get("ctx", "")
    return Block("asynchronous execution on %s" % ctx, [t for t in tables if t.records], fig,
                 "; ".join(readings) + noisy_note(sweep))
