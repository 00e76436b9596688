"""python -m gluonperf.bench hybridize: imperative vs hybridize() vs hybridize(static_alloc=True, static_shape=True)."""
from ..cli import common as cli
from . import shared
from ..training.model_spec import label

NAME = "hybridize"
QUICK = ["--repeat", "1", "--number", "5"]
RECORDS = ("hybridize",)
TITLE = "Hybridize: imperative vs hybridize() vs static"
COLUMNS = ["name", "median_s", "iqr_s", "noisy", "speedup", "speedup_ci_low", "speedup_ci_high", "verdict",
           "samples_per_s", "max_abs_diff", "hybrid_forward_calls", "calls"]


def add_parser(sub, common):
    p = sub.add_parser(
        "hybridize", parents=[common],
        help="imperative vs hybridize() vs hybridize(static_alloc, static_shape)",
        description="Time the same model, with the same weights and input, imperatively, after "
                    "hybridize(), and after hybridize(static_alloc=True, static_shape=True). Reports "
                    "per-call time, speedup over imperative, the largest output difference, and how "
                    "often Python's hybrid_forward ran. Runs on the first context of --ctx.")
    cli.add_model_flags(p, "mlp")
    p.add_argument("--list-models", action="store_true", help="list the names --model accepts and exit")
    p.add_argument("--batch-size", type=cli.positive_int, default=1, help="samples per call (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=5, help="timed repeats per mode (default: %(default)s)")
    p.add_argument("--number", type=cli.positive_int, default=None,
                   help="calls per repeat (default: 1000 forward calls, as in the chapter; 10 with --train)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=1,
                   help="untimed calls per mode before timing (default: %(default)s)")
    p.add_argument("--train", action="store_true",
                   help="time full training steps (forward, backward, Trainer.step) instead of forward calls")
    cli.add_threshold(p)
    p.add_argument("--export", metavar="DIR",
                   help="export the hybridized model (symbol JSON + params) to DIR and check that "
                        "SymbolBlock.imports gives the same outputs")


def _number(args):
    return args.number or (10 if args.train else 1000)


def check(args):
    """The flags' check that needs no MXNet beyond --json and --csv (bench's main checks those):
    --export's directory."""
    cli.check_output_dir(args.export, "--export")


def measure(args):
    """Check the flags, run the experiment: (records, the contexts they ran on, the model's ModelSpec)."""
    from ..experiments.hybridize import compare_modes
    from ..measure.timing import Timing
    cli.check_outputs(args)
    check(args)
    spec = cli.resolve_model(args, 2 if args.model == "mlp" else 10)  # bad models fail here, before any work
    ctxs = cli.contexts(args)
    with cli.progress_bar(3 * args.repeat, "hybridize") as bar:
        timing = Timing(repeat=args.repeat, warmup=args.warmup, number=_number(args), progress=bar.update)
        results = compare_modes(model=spec, batch_size=args.batch_size, ctx=ctxs[0], timing=timing,
                                train=args.train, export_dir=args.export, threshold=args.threshold)
    return results, ctxs[:1], spec


def heading(model, train, batch_size, ctx):
    """What ran: the title's start on the terminal and in the report."""
    return "%s %s, batch %s on %s" % (label(model), "train steps" if train else "forward calls", batch_size, ctx)


def show(args, results, ctxs, spec):
    """The terminal's table, the verdicts and the export."""
    timed = [r for r in results if r.name != "export"]
    cli.emit(timed, args, ctxs,
             title="%s: per-call time over %d repeats of %d calls"
                   % (heading(spec, args.train, args.batch_size, ctxs[0]), args.repeat, _number(args)),
             columns=COLUMNS)
    for r in timed:
        if r.metrics.get("verdict_text"):
            print("%s vs imperative: %s" % (r.name, r.metrics["verdict_text"]))
    shared.warn_unstable(timed)
    for r in results:
        if r.name == "export":
            print("exported %s and %s; SymbolBlock.imports matches (max abs diff %.3g)"
                  % (r.metrics["symbol_file"], r.metrics["params_file"], r.metrics["max_abs_diff"]))
    shared.warn_noisy(timed)


def section(records):
    """The report's block: per-call times and speed-ups, and the fastest mode against imperative."""
    from ..render.figures import figure, labelled_bars, short_number, svg
    from ..render.kinds import Block, Table, noisy_note, report_columns, seconds, verdict_of, with_interval
    timed = [r for r in records if "speedup" in r.metrics]
    export = [r for r in records if r.name == "export"]
    m = timed[0].metrics
    base = next((r for r in timed if r.name == "imperative"), timed[0])
    # the fastest: the highest interval's lower end (the estimate where there is none), the baseline aside
    best = max([r for r in timed if r is not base] or timed,
               key=lambda r: r.metrics.get("speedup_ci_low") or r.metrics["speedup"])
    fig, ax = figure(width=8.0, height=0.5 * len(timed) + 1.2)
    times = [r.metrics["median_s"] for r in timed]
    half_iqr = [r.metrics.get("iqr_s", 0) / 2 * 1e3 for r in timed]  # the spread gluonperf judges noise by
    low = [min(h, t * 1e3) for h, t in zip(half_iqr, times)]  # a bar's spread never reaches below 0
    labelled_bars(ax[0][0], [r.name for r in timed], [t * 1e3 for t in times], [low, half_iqr],
                  "ms per call (median, bar: IQR); label: speedup over %s" % base.name,
                  log=max(times) > 30 * min(times), annotate=None)
    for y, r in zip(range(len(timed))[::-1], timed):
        end = (r.metrics["median_s"] + r.metrics.get("iqr_s", 0) / 2) * 1e3
        ax[0][0].annotate("%sx" % short_number(r.metrics["speedup"]), (end, y),
                          xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    tables = [Table(timed, report_columns(COLUMNS, besides={"iqr_s": ["min_s", "max_s"]}))]
    if export:
        tables.append(Table(export, ["name", "symbol_file", "params_file", "max_abs_diff"], "exported model"))
    return Block(heading(m.get("model"), m.get("task") == "train_step", m.get("batch_size"), m.get("ctx")),
                 tables, svg(fig),
                 "%s against %s: %s the speed%s (%s vs %s per call)%s"
                 % (best.name, base.name, with_interval(best.metrics, "speedup", "repeats"),
                    verdict_of(best.metrics, what="repeats"), seconds(best.metrics["median_s"]),
                    seconds(base.metrics["median_s"]), noisy_note(timed)))
