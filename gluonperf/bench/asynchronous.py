"""python -m gluonperf.bench async: the chapter's asynchronous-execution experiments."""

from ..cli import common as cli
from . import shared

NAME = "async"


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
    p.set_defaults(run=run)


def run(args):
    from ..experiments.asynchronous import blocking_calls, queue_vs_finish, sync_vs_async
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
        sweep = sync_vs_async(ctx, args.sizes, args.repeat, args.iterations, args.op, trace=trace,
                              progress=bar.update)
    rows, cross = sweep[:-1], sweep[-1]
    cli.emit_sections([
        ("y = nd.dot(x, x).sum() with x %dx%d on %s: queued vs finished (median of %d)"
         % (args.demo_size, args.demo_size, ctx, args.repeat), demo,
         ["name", "median_s", "iqr_s", "ratio_to_queued"]),
        ("which calls block: queue y = nd.dot(x, x) and make the call (median_s), then time "
         "nd.waitall() (left_s); blocks: does the call wait while y's input is held back", calls,
         ["name", "median_s", "left_s", "blocks"]),
        ("%s per iteration on %s: wait_to_read() every iteration (sync) vs waitall() once "
         "(async); t1 front end, t2 back end, t3 return, per iteration" % (cross.metrics["op"], ctx), rows,
         ["name", "iterations", "sync_s", "async_s", "speedup", "speedup_ci_low", "speedup_ci_high", "verdict",
          "t1_s", "t2_s", "t3_s", "t2_plus_t3_s", "bound", "model_fits", "noisy"]),
    ], args, ctxs[:1], records=demo + calls + rows + [cross])
    print()
    m = cross.metrics
    if m["backend_bound_from"] is None:
        print("front end vs back end: the Python front end set the async loop's pace at every size swept")
    else:
        print("front end vs back end: from %dx%d up the operator (t2), not Python (t1), sets the async "
              "loop's pace" % (m["backend_bound_from"], m["backend_bound_from"]))
    if m["size"] is None:
        print("crossover: async still gains %d%% or more at the largest size swept"
              % (100 * m["gain_below"]))
    else:
        print("crossover: from %dx%d up, async gains less than %d%%" % (m["size"], m["size"], 100 * m["gain_below"]))
    shared.dump_trace(trace)
    shared.warn_noisy(rows)
    return 0
