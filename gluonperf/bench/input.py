"""python -m gluonperf.bench input: the input pipeline alone."""
import argparse

from ..cli import common as cli

NAME = "input"
QUICK = None  # needs --dataset PATH, images on disk (python -m gluonperf.dataset make)
RECORDS = ("input", "input-stage", "input-step")
# the loaders against the training step, then the stages
COLUMNS = ["name", "loader", "images_per_s", "images_per_s_ci_low", "images_per_s_ci_high", "images_per_s_n",
           "memory_peak_bytes", "vs_step", "vs_step_ci_low", "vs_step_ci_high", "verdict"]
STAGE_COLUMNS = ["name", "per_image_s", "images_per_s", "images_per_s_ci_low", "images_per_s_ci_high",
                 "images_per_s_n"]


def add_parser(sub, common):
    p = sub.add_parser(
        "input", parents=[common],
        help="the input pipeline alone: images/s of loading, decoding and augmenting real images, by source and "
             "workers, per stage, against the training step",
        description="The input pipeline of --dataset PATH (a folder of class subfolders, or a .rec with its .idx) "
                    "for --model's input size, with GluonCV's ImageNet training transforms: images/s of each "
                    "source (folder or .rec through a DataLoader with --workers processes; a .rec through MXNet's "
                    "ImageRecordIter with --workers preprocess threads) with its 95% interval over --repeat "
                    "repeats, the peak memory of the process and its workers (PSS); the cost of each stage (read, decode, "
                    "augment, batchify, copy to the context) timed on its own over a sample of images; and the "
                    "training step's own consumption rate on the first context of --ctx (a batch of the same "
                    "shape held in memory), which each loader's rate is set against (keeps up / too slow, a Welch "
                    "interval: they ran apart). On CPU contexts the loader measured alone has the cores to itself; "
                    "while training it shares them (python -m gluonperf.profile --dataset PATH --input-only "
                    "measures that).")
    p.add_argument("--dataset", required=True, metavar="PATH",
                   help="a folder with one subfolder per class (or train/ and val/ of them), or a .rec with its .idx "
                        "(python -m gluonperf.dataset make DIR --rec writes both)")
    p.add_argument("--model", default="resnet18_v1",
                   help="whose input size the images are cropped to and whose step they are set against "
                        "(default: %(default)s, 224x224)")
    p.add_argument("--batch-size", type=cli.positive_int, default=32, help="images per batch (default: %(default)s)")
    p.add_argument("--workers", type=_workers_list, default=[0, 1, 2], metavar="N[,N...]",
                   help="comma-separated numbers of DataLoader worker processes (ImageRecordIter: preprocess threads, "
                        "at least 1) (default: 0,1,2)")
    p.add_argument("--sources", default=None, metavar="S[,S...]",
                   help="folder (a folder), rec and recorditer (a .rec) (default: every source that reads --dataset)")
    p.add_argument("--repeat", type=cli.positive_int, default=5,
                   help="timed repeats per source and workers, and of each stage; the intervals are over these "
                        "(default: %(default)s)")
    p.add_argument("--batches", type=cli.positive_int, default=4, help="batches per timed repeat (default: %(default)s)")
    p.add_argument("--sample", type=cli.positive_int, default=16,
                   help="images the per-stage costs are timed on (default: %(default)s)")
    cli.add_threshold(p)


def _workers_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = [-1]
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError("%r is not a list of worker counts, comma-separated (e.g. 0,1,2)" % text)
    return list(dict.fromkeys(values))


def measure(args):
    """Check the flags, time each loader, each stage and the training step: (records, the context)."""
    from .. import UserError
    from ..training.data import check_available
    from ..experiments.input_pipeline import SOURCES, Loaders, bench_input, sources_of
    from ..training.image_data import is_path
    if not is_path(args.dataset):
        raise UserError("--dataset %s is held in memory, with no loader to measure; give the PATH of a folder of class "
                        "subfolders or of a .rec (python -m gluonperf.dataset make DIR --rec makes both)" % args.dataset)
    ctxs = cli.contexts(args)
    spec = cli.resolve_model(args)  # --model checked and parsed once, here, and passed on as the object
    check_available(args.dataset, None, spec)  # one line for bad data, before any work
    sources = sources_of(args.dataset)
    if args.sources:
        asked = [v.strip() for v in args.sources.split(",") if v.strip()]
        bad = [v for v in asked if v not in SOURCES or v not in sources]
        if bad or not asked:
            raise UserError("--sources %s: --dataset %s is read by %s" % (args.sources, args.dataset, ",".join(sources)))
        sources = asked
    cli.check_outputs(args)
    runs = sum(len([w for w in args.workers if w or s != "recorditer"]) for s in sources)
    with cli.progress_bar(args.repeat * (1 + runs + len([s for s in sources if s != "recorditer"])), "input") as bar:
        loaders = Loaders(args.dataset, spec, args.batch_size, args.workers, sources)
        results = bench_input(loaders, ctxs[0], args.repeat, args.batches, args.sample, threshold=args.threshold,
                              progress=bar.update)
    return results, ctxs[:1]


def show(args, results, ctxs):
    """The terminal's two tables (the training step's rate in the first one's title)."""
    step = next(r for r in results if r.bench == "input-step").metrics
    loaders = [r for r in results if r.bench == "input"]
    stages = [r for r in results if r.bench == "input-stage"]
    sections = [
        ("input pipeline of %s at %dx%d (%s's input), batch %d: images/s of each loader alone (geometric mean of %d "
         "repeats of %d batches, 95%% interval), peak memory (PSS) of the process and its workers; vs_step: the loader's rate "
         "over the training step's, %.4g images/s on %s (95%% CI %.4g-%.4g, %d repeats; a batch in memory)"
         % (args.dataset, step["image_size"], step["image_size"], args.model, args.batch_size, args.repeat,
            args.batches, step["images_per_s"], step["context"], step["images_per_s_ci_low"],
            step["images_per_s_ci_high"], step["images_per_s_n"]), loaders, COLUMNS),
        ("per-stage cost in the main process, each stage timed on its own over %d images, %d repeats (95%% interval); "
         "images_per_s: what one core reaches on that stage alone (after a warm-up pass)" % (args.sample, args.repeat), stages,
         STAGE_COLUMNS)]
    cli.emit_sections(sections, args, ctxs,
                      records=loaders + stages + [r for r in results if r.bench == "input-step"])
    if all(c.device_type == "cpu" for c in ctxs):
        cli.note("note: each loader was measured alone, with the CPU cores to itself; while training on CPU "
                 "contexts it shares them with the step: python -m gluonperf.profile --dataset %s --input-only "
                 "measures the share of the step spent waiting" % args.dataset)

