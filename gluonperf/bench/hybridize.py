"""python -m gluonperf.bench hybridize: imperative vs hybridize() vs hybridize(static_alloc=True, static_shape=True)."""

from ..cli import common as cli
from . import shared

NAME = "hybridize"


def add_parser(sub, common):
    p = sub.add_parser(
        "hybridize", parents=[common],
        help="imperative vs hybridize() vs hybridize(static_alloc, static_shape)",
        description="Time the same model, with the same weights and input, imperatively, after "
                    "hybridize(), and after hybridize(static_alloc=True, static_shape=True). Reports "
                    "per-call time, speedup over imperative, the largest output difference, and how "
                    "often Python's hybrid_forward ran. Runs on the first context of --ctx.")
    p.add_argument("--model", default="mlp", help="model name (default: %(default)s; see --list-models)")
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
    p.set_defaults(run=run)


def run(args):
    from ..experiments.hybridize import compare_modes
    if args.list_models:
        cli.print_models()
        return 0
    from ..training.models import get_model
    get_model(args.model)  # unknown names fail here, before any work
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_dir(args.export, "--export")
    number = args.number or (10 if args.train else 1000)
    with cli.progress_bar(3 * args.repeat, "hybridize") as bar:
        results = compare_modes(model=args.model, batch_size=args.batch_size, ctx=ctxs[0],
                                repeat=args.repeat, number=number, warmup=args.warmup,
                                train=args.train, export_dir=args.export, progress=bar.update,
                                threshold=args.threshold)
    timed = [r for r in results if r.name != "export"]
    cli.emit(timed, args, ctxs[:1],
             title="%s %s, batch %d on %s: per-call time over %d repeats of %d calls"
                   % (args.model, "train steps" if args.train else "forward calls",
                      args.batch_size, ctxs[0], args.repeat, number),
             columns=["name", "median_s", "iqr_s", "noisy", "speedup", "speedup_ci_low", "speedup_ci_high",
                      "verdict", "samples_per_s", "max_abs_diff", "hybrid_forward_calls", "calls"])
    for r in timed:
        if r.metrics.get("verdict_text"):
            print("%s vs imperative: %s" % (r.name, r.metrics["verdict_text"]))
    shared.warn_unstable(timed)
    for r in results:
        if r.name == "export":
            print("exported %s and %s; SymbolBlock.imports matches (max abs diff %.3g)"
                  % (r.metrics["symbol_file"], r.metrics["params_file"], r.metrics["max_abs_diff"]))
    shared.warn_noisy(timed)
    return 0
