"""python -m gluonperf.bench footprint: the memory of a training step."""
import argparse

from ..cli import common as cli
from ..cli import units
from ..training.model_spec import label

NAME = "footprint"
# --budget 2M: above LeNet's parameters (a budget below them is refused), below what its step needs, so that
# the budget rows come without the runs that confirm a batch (up to 3 fresh processes per configuration;
# tests/test_footprint.py runs that search)
QUICK = ["--model", "lenet", "--batch-sizes", "8", "--hybridize", "hybrid", "--checkpoint", "0,2", "--steps", "1",
         "--budget", "2M"]
RECORDS = ("footprint", "footprint-budget")
TITLE = "Memory of a training step: settings, checkpointing, budgets"
# the runs (with --repeat N the terminal adds the peak's min and max; error where a run failed) ...
COLUMNS = ["name", "batch_size", "model_bytes", "peak_above_bytes", "bytes_per_sample", "needs_bytes",
           "median_s", "iqr_s", "images_per_s", "peak_vs_plain", "time_vs_plain"]
# ... and, with --budget, the largest batch within each budget
BUDGET_COLUMNS = ["name", "budget_bytes", "predicted_batch", "largest_batch", "fits", "needs_bytes", "images_per_s",
                  "over_batch", "confirm_runs"]


def _hybridize_list(text):
    from ..config import HYBRIDIZE
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in HYBRIDIZE]
    if bad or not items:
        raise argparse.ArgumentTypeError("%r: choose from %s, comma-separated" % (text, ",".join(HYBRIDIZE)))
    return list(dict.fromkeys(items))


def add_parser(sub, common):
    from ..config import OPTIMIZERS
    p = sub.add_parser(
        "footprint", parents=[common],
        help="the memory of a training step per batch size, hybridize setting and checkpointing; "
             "the largest batch that fits a budget",
        description="Where a training step's memory goes and what each setting costs. Every (hybridize, "
                    "checkpoint segments, batch size) runs in a fresh process: build the model, gradients and "
                    "optimizer (--optimizer), one warm-up step, then --steps timed training steps while a "
                    "background thread samples RSS (device memory on GPU contexts). Reports the model's bytes "
                    "(parameters + gradients + optimizer states, counted from the arrays), the peak during the "
                    "steps above them (activations, workspace, cached graphs), that per sample, what the step "
                    "needs in all, the step time and images/s. With --budget: per configuration the largest "
                    "batch whose needs fit, extrapolated from the measured slope and confirmed by a run. "
                    "--checkpoint N cuts the model into N segments and recomputes their activations in the "
                    "backward (gradient checkpointing; train with it: python -m gluonperf.train "
                    "--checkpoint-segments N). Times come from separate processes, one after the other: on a "
                    "shared machine trust the memory figures more than the times.")
    cli.add_model_flags(p, "resnet18")
    p.add_argument("--batch-sizes", type=cli.positive_int_list, default=[32, 64, 128, 256],
                   help="comma-separated global batch sizes, split over --ctx (default: 32,64,128,256)")
    p.add_argument("--hybridize", type=_hybridize_list, default=["none", "hybrid", "static"],
                   help="comma-separated settings: none (imperative), hybrid (hybridize()), static "
                        "(hybridize(static_alloc=True, static_shape=True)) (default: none,hybrid,static)")
    p.add_argument("--checkpoint", type=cli.non_negative_int_list, default=[0], metavar="N[,N...]",
                   help="comma-separated numbers of checkpoint segments, 0 for none (default: 0). With "
                        "checkpointing, static runs as hybrid: static buffers would keep every segment's "
                        "recomputed activations")
    p.add_argument("--budget", type=units.size_bytes, action="append", metavar="SIZE",
                   help="memory budget for the step (model + peak above it), e.g. 2G or 512M; report the "
                        "largest batch that fits it per configuration (repeatable)")
    p.add_argument("--steps", type=cli.positive_int, default=5, help="timed steps per run (default: %(default)s)")
    p.add_argument("--warmup", type=cli.positive_int, default=1,
                   help="untimed steps before them (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=1,
                   help="fresh processes per run; the table then shows the median peak and its min and max "
                        "(glibc's malloc makes the same run's peak RSS differ from process to process) "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=cli.non_negative_int, default=0, help="seed of weights and data (default: %(default)s)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="bfloat16: the step as python -m gluonperf.train --dtype bfloat16 runs it (mixed "
                        "precision; CPU contexts; not with --checkpoint) (default: %(default)s)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                   help="the optimizer whose state the model's bytes count: sgd and nag (momentum: one array "
                        "per weight), adagrad and rmsprop (one), adam and adamw (two) (default: %(default)s)")
    p.add_argument("--plot", metavar="PNG",
                   help="also draw memory and images/s against the batch size, one line per configuration")


def measure(args):
    """Check the flags, run every configuration in fresh processes: (records, the contexts, the
    model's ModelSpec)."""
    from ..experiments.footprint import StepSettings, check_dtype, effective_configs, footprint, rows_of, why_not_cut
    spec = cli.resolve_model(args)  # bad models fail here, before any work
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.plot, "--plot")
    budgets = sorted(set(args.budget or []))
    check_dtype(args.dtype, ctxs, args.checkpoint)  # before any note about it
    checkpoint = args.checkpoint
    if 0 in checkpoint and any(checkpoint):
        why = why_not_cut(spec, max(checkpoint))
        if why:  # the plain step is still worth measuring
            checkpoint = [0]
            cli.note("note: --checkpoint: %s; measuring without checkpointing" % why)
    configs = effective_configs(args.hybridize, checkpoint)
    if "static" in args.hybridize and any(checkpoint):
        cli.note("note: with checkpointing, static runs as hybrid (segments are never statically allocated)")
    if getattr(args, "dtype_note", None) and args.dtype == "bfloat16":
        cli.note("note: " + args.dtype_note)
    runs = {}  # what a stopped run keeps: the runs it finished
    with cli.progress_bar(len(configs) * (len(args.batch_sizes) + len(budgets)) * args.repeat, "footprint") as bar, \
            cli.keep_on_stop(lambda: rows_of(dict(runs), configs), args, "%s training step on %s: the runs that "
                             "finished" % (spec.label, ",".join(map(str, ctxs))), COLUMNS, ctxs):
        settings = StepSettings(spec, ctxs, steps=args.steps, warmup=args.warmup, seed=args.seed,
                                dtype=args.dtype, optimizer=args.optimizer)
        rows = footprint(settings, args.batch_sizes, configs, budgets=budgets, repeat=args.repeat,
                         progress=bar.update, runs=runs)
    return rows, ctxs, spec


def show(args, rows, ctxs, spec):
    """The terminal's tables (the runs; the budgets) and the plot."""
    from ..render.plots import plot_footprint
    from ..runtime.precision import precision_label
    results = [r for r in rows if r.bench == "footprint"]
    budget_rows = [r for r in rows if r.bench == "footprint-budget"]
    memory = "device memory" if any(c.device_type == "gpu" for c in ctxs) else "RSS"
    columns = list(COLUMNS)
    if args.repeat > 1:
        columns[4:4] = ["peak_above_min_bytes", "peak_above_max_bytes"]
    if any("error" in r.metrics for r in results):
        columns.append("error")
    sections = [("%s training step on %s (%s%s): %s, %d warm-up + %d timed steps; "
                 "model = parameters + gradients + optimizer states; peak above = peak %s during the steps above "
                 "the model%s; needs = model + peak above"
                 % (spec.label, ",".join(map(str, ctxs)),
                    "sgd, momentum" if args.optimizer == "sgd" else args.optimizer, precision_label(args.dtype),
                    "one fresh process per run" if args.repeat == 1 else "%d fresh processes per run" % args.repeat,
                    args.warmup, args.steps, memory, " (median over the processes)" if args.repeat > 1 else ""),
                 results, columns)]
    if budget_rows:
        bcolumns = list(BUDGET_COLUMNS)
        if any("error" in r.metrics for r in budget_rows):
            bcolumns.append("error")
        sections.append(("largest batch whose needs fit the budget: predicted from the measured slope, confirmed "
                         "and refined by runs; over_batch: the smallest batch that ran over it", budget_rows,
                         bcolumns))
    cli.emit_sections(sections, args, ctxs)
    if args.plot:
        plot_footprint(results + budget_rows, args.plot)
        cli.note("wrote plot %s" % args.plot)


def section(records):
    """The report's block: what each (setting, batch) needs, model and step stacked; the
    checkpointed runs against their plain step; the largest batch per budget."""
    from ..render.figures import figure, short_number, svg
    from ..render.kinds import Block, Table, report_columns
    from ..runtime.precision import precision_label
    runs = [r for r in records if r.bench == "footprint"]
    budgets = [r for r in records if r.bench == "footprint-budget"]
    ok = [r for r in runs if "error" not in r.metrics]
    mib = 2.0 ** 20
    labels = ["%s, batch %s" % (r.name, r.metrics["batch_size"]) for r in ok]
    fig, ax = figure(width=8.0, height=0.45 * len(ok) + 1.4)
    a = ax[0][0]
    ys = list(range(len(ok)))[::-1]  # first run on top
    model = [r.metrics["model_bytes"] / mib for r in ok]
    above = [r.metrics["peak_above_bytes"] / mib for r in ok]
    a.barh(ys, model, color="tab:grey", label="model (parameters, gradients, optimizer states)")
    a.barh(ys, above, left=model, color="tab:blue", label="the step's peak above the model")
    a.set_yticks(ys)
    a.set_yticklabels(labels, fontsize=8)
    a.set_xlabel("MiB")
    a.legend(fontsize=7, loc="lower right")
    for r in budgets:
        if r.metrics.get("budget_bytes"):
            a.axvline(r.metrics["budget_bytes"] / mib, color="tab:red", linestyle="--", linewidth=1)
    least = min(ok, key=lambda r: r.metrics["needs_bytes"] / r.metrics["batch_size"])
    parts = ["least memory per sample: %s at batch %s, %.0f MiB above the model"
             % (least.name, least.metrics["batch_size"], least.metrics["peak_above_bytes"] / mib)]
    parts += ["%s at batch %s: %s the plain step's memory at %s its time (one run each, no interval)"
              % (r.name, r.metrics["batch_size"], short_number(r.metrics["peak_vs_plain"]) + "x",
                 short_number(r.metrics["time_vs_plain"]) + "x") for r in ok if r.metrics.get("peak_vs_plain")]
    parts += ["largest batch within %.0f MiB for %s: %s" % (r.metrics["budget_bytes"] / mib, r.name,
                                                            r.metrics.get("largest_batch"))
              for r in budgets if r.metrics.get("budget_bytes")]
    m = runs[0].metrics
    tables = [Table(runs, report_columns(COLUMNS) + ["error"],
                    "each run: the model's bytes and the step's peak above them")]
    if budgets:
        tables.append(Table(budgets, report_columns(BUDGET_COLUMNS) + ["error"],
                            "the largest batch within each budget"))
    dtype = m.get("dtype", "float32")
    return Block("%s on %s%s" % (label(m.get("model", "")), m.get("contexts"), precision_label(dtype)),
                 tables, svg(fig), "; ".join(parts))
