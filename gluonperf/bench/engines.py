"""python -m gluonperf.bench engines: which engine trains this model fastest on N devices."""
import argparse

from ..cli import common as cli

NAME = "engines"
# (the quick run leaves Horovod's engine to tests/test_engines.py and tests/test_horovod.py, which run it)
QUICK = ["--model", "mlp", "--batch-size", "16", "--steps", "1", "--epochs", "2", "--rounds", "1",
         "--engines", "single,dist_sync"]
# its runs are gluonperf commands, each with its own thread default: none is set for the bench
RUNS_COMMANDS = True
RECORDS = ("engines",)
TITLE = "Which engine: one process, Horovod or the parameter server"
COLUMNS = ["name", "setup", "step_s", "images_per_s", "vs_baseline", "vs_baseline_ci_low", "vs_baseline_ci_high",
           "verdict"]


def _engines(text):
    from ..scaling.engines import ENGINES
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in ENGINES]
    if bad or not items or len(set(items)) != len(items):
        raise argparse.ArgumentTypeError("%r: choose distinct engines from %s, comma-separated"
                                         % (text, ",".join(ENGINES)))
    return items


def add_parser(sub, common):
    p = sub.add_parser(
        "engines", parents=[common],
        help="one process with N contexts, N processes on Horovod, N on dist_sync: the same model and "
             "global batch, interleaved",
        description="Which engine trains this model fastest on these devices? single: one process with "
                    "every --ctx context (gradients summed inside MXNet: kvstore flat on CPUs, device on GPUs); "
                    "horovod: one process per context, gradients summed by Horovod's ring allreduce "
                    "(python -m gluonperf.launch --engine horovod; needs Horovod: bash scripts/install-horovod); "
                    "dist_sync: one worker process per context and one server, MXNet's parameter server "
                    "(python -m gluonperf.launch). Each runs python -m gluonperf.train on synthetic data of "
                    "the model's input, --batch-size images per device, for --epochs epochs of --steps steps "
                    "(the first epoch untimed), with the commands' own thread defaults. --rounds rounds run "
                    "every engine once, in an order that rotates; each engine's speed against the first of "
                    "--engines is a paired ratio per round, with its interval and a verdict. A single CPU "
                    "context in --ctx is paired with the next (cpu0,cpu1); on GPUs dist_sync is left out "
                    "(its workers would share --ctx).")
    cli.add_model_flags(p, "resnet18")
    p.add_argument("--engines", type=_engines, default=None, metavar="E[,E...]",
                   help="engines to compare, the first being the baseline: single, horovod, dist_sync "
                        "(default: all three; horovod left out, with a note, where Horovod is not installed)")
    p.add_argument("--batch-size", type=cli.positive_int, default=16,
                   help="images per device per step; the global batch is this times the devices "
                        "(default: %(default)s)")
    p.add_argument("--steps", type=cli.positive_int, default=8, help="steps per epoch (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=3, choices=range(2, 101), metavar="E",
                   help="epochs per run, 2 to 100; the first is not timed (default: %(default)s)")
    p.add_argument("--rounds", type=cli.positive_int, default=5,
                   help="rounds of every engine once (default: %(default)s)")
    cli.add_threshold(p)
    p.add_argument("--timeout", type=cli.positive_float, default=600, metavar="SEC",
                   help="stop a run that takes longer than SEC seconds, and the bench with it "
                        "(default: %(default)s)")


def _devices(ctxs):
    """The devices the engines share out, as names: --ctx's, or cpu0,cpu1 for a single CPU context."""
    from ..runtime.contexts import describe
    if len(ctxs) == 1 and ctxs[0].device_type == "cpu":
        return ["cpu%d" % ctxs[0].device_id, "cpu%d" % (ctxs[0].device_id + 1)]
    return describe(ctxs).split(",")


def measure(args):
    """Check the flags, run the rounds: (records, the devices, the model's ModelSpec)."""
    from .. import UserError
    from ..scaling.engines import ENGINES, Training, compare_engines, engine_records
    from ..runtime.horovod_launcher import INSTALL, available, require
    spec = cli.resolve_model(args)
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    devices = _devices(ctxs)
    if len(devices) < 2:
        raise UserError("--ctx %s: the engines differ in how they sum several devices' gradients; give at least 2 "
                        "contexts (e.g. --ctx cpu0,cpu1 or gpu0,gpu1)" % args.ctx)
    gpus = any(d.startswith("gpu") for d in devices)
    engines = args.engines
    if engines is None:
        engines = [e for e in ENGINES if not (e == "dist_sync" and gpus)]
        if not available():
            engines.remove("horovod")
            cli.note("note: Horovod is not installed, so the horovod engine is left out (install it with %s)"
                     % INSTALL)
    elif "horovod" in engines:
        require("--engines horovod")
    if "dist_sync" in engines and gpus:
        raise UserError("--engines dist_sync: its workers here all train on --ctx's first context; on GPUs "
                        "leave it out")
    if len(engines) < 2:
        cli.note("note: only %s to run: nothing to compare it with" % engines[0])
    steps_of = {}  # each engine's step per finished run: what a stopped bench keeps
    training = Training(spec, devices, args.batch_size, args.steps, args.epochs)
    kept = lambda: engine_records(steps_of, training, args.threshold, partial=True)  # noqa: E731
    with cli.progress_bar(args.rounds * len(engines), "engines") as bar, \
            cli.keep_on_stop(kept, args, "%s on %s: the runs that finished" % (spec.label, ",".join(devices)),
                             COLUMNS, devices):
        records = compare_engines(training, engines, rounds=args.rounds, threshold=args.threshold,
                                  timeout=args.timeout, progress=bar.update, steps_of=steps_of)
    return records, devices, spec


def show(args, records, devices, spec):
    """The terminal's table and its reading."""
    first = records[0].metrics
    cli.emit(records, args, devices, columns=COLUMNS,
             title="%s on %s, %d images per device (global batch %d), %d rounds of %d epochs x %d steps "
                   "(first epoch untimed); vs_baseline: speed against %s (> 1: faster)"
             % (spec.label, ",".join(devices), first["per_device_batch"], first["global_batch"],
                first["rounds"], first["epochs"], first["steps"], first["baseline"]))
    for r in records[1:]:
        print("%s against %s: %s" % (r.name, first["baseline"], r.metrics["verdict_text"]))


def section(records):
    """The report's block: the engines' table and which one to use."""
    from ..render.kinds import Block, Table, report_columns
    first = records[0].metrics
    reading = "; ".join("%s against %s: %s" % (r.name, first["baseline"], r.metrics["verdict_text"])
                        for r in records[1:]) or "one engine only"
    return Block("%s on %s, %d images per device" % (first.get("model"), first.get("contexts"),
                                                     first.get("per_device_batch")),
                 [Table(records, report_columns(COLUMNS))], None, reading)
