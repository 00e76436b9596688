"""The flags and argument types every gluonperf command shares: --ctx, --json, --csv, --wide
and --stall-timeout (`common_parser`), --threshold, --model and what a model of one's own
needs (`add_model_flags`), and the argparse types that refuse bad input in one line
(`positive_int`, `percentage`, `comma_list`, ... made with `checked`). The flags of a training
configuration are in `cli.training_flags`."""
import argparse
import math

from ..runtime import guard


def common_parser(ctx_default="cpu"):
    """Flags shared by every subcommand: --ctx, --json, --csv, --wide."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--ctx", default=ctx_default,
                   help="contexts: cpu, cpu0,cpu1, gpu (all GPUs), gpu0,gpu1 or gpu:0 (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON lines, with the environment")
    p.add_argument("--csv", metavar="PATH", help="also write the results as CSV")
    add_wide(p)
    add_stall_timeout(p)
    return p


def add_wide(p):
    """--wide: the tables with every column under its recorded name, each cell with its unit,
    however wide (by default a table fits the terminal, each column's unit once in its header:
    records.format_table)."""
    p.add_argument("--wide", action="store_true",
                   help="print every column of the tables, however wide, under its recorded name, each cell with "
                        "its unit (median_s: 660.3 us) and each interval's ends apart (by default a table fits the "
                        "terminal: COLUMNS, or 100 columns under a pipe, and says a column's unit once, in its "
                        "header: median (us): 660.3)")


def add_stall_timeout(p):
    p.add_argument("--stall-timeout", type=non_negative_float, default=guard.DEFAULT_STALL_TIMEOUT, metavar="SEC",
                   help="stop with exit code 3 when a timed region or a step makes no progress for SEC "
                        "seconds, naming what it waited on (0: never; default: %(default)g)")


def percentage(text, upper=100, upper_included=False):
    """'5%', '5' -> 0.05 (an argparse type): from 0% up to `upper`%."""
    raw = text.strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a percentage; use e.g. 5%%" % text)
    if not (0 <= value <= upper if upper_included else 0 <= value < upper):
        raise argparse.ArgumentTypeError("%r must be between 0%% and %g%%%s" % (
            text, upper, "" if upper_included else " (not included)"))
    return value / 100.0


def parse_threshold(text):
    """'10%', '10' -> 0.10; '0.5%' -> 0.005 (0% to 1000%): compare's --fail-above, report's --threshold."""
    return percentage(text, upper=1000, upper_included=True)


def add_threshold(p, default=0.05):
    """--threshold: the change below which a ratio counts as 'the same' (stats.verdict)."""
    p.add_argument("--threshold", type=percentage, default=default, metavar="PCT",
                   help="a change within +-PCT is 'the same'; faster/slower needs the 95%% interval to exclude "
                        "1 and the estimate past PCT (default: " + "%g%%%%)" % (100 * default))


def checked(convert, what, ok, rule):
    """An argparse `type` that converts with `convert` and accepts values where `ok`."""
    def check(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not %s" % (text, what))
        if not ok(value):
            raise argparse.ArgumentTypeError("%r %s" % (text, rule))
        return value
    return check


positive_int = checked(int, "a whole number", lambda v: v >= 1, "must be at least 1")
non_negative_int = checked(int, "a whole number", lambda v: v >= 0, "must be 0 or more")
tcp_port = checked(int, "a whole number", lambda v: 0 < v < 65536, "is not a TCP port (1 to 65535)")

positive_float = checked(float, "a number", lambda v: math.isfinite(v) and v > 0, "must be above 0")
non_negative_float = checked(float, "a number", lambda v: math.isfinite(v) and v >= 0, "must be 0 or more")
momentum = checked(float, "a number", lambda v: 0 <= v < 1, "must be at least 0 and below 1 (e.g. 0.9)")


def comma_list(item, example):
    """An argparse type for whole numbers separated by commas, each read by `item` (an argparse
    type, whose error names the item that is wrong): '10, 100,1000' -> [10, 100, 1000]."""
    def parse(text):
        items = [t.strip() for t in text.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError("%r: give whole numbers separated by commas, e.g. %s" % (text, example))
        return [item(t) for t in items]
    return parse


positive_int_list = comma_list(positive_int, "10,100,1000")
non_negative_int_list = comma_list(non_negative_int, "0,2,4")


MODEL_HELP = ("resnet18 (the book's 28x28 ResNet-18), lenet, mlp, a GluonCV model-zoo name (see --list-models), "
              "or your own: package.module:factory or path/to/file.py:factory, a function that returns a "
              "gluon Block, with --input-shape (docs: Your own model)")


def add_model_flags(p, default, help=MODEL_HELP):
    """--model and what a model of one's own needs: its factory's arguments, one sample's shape
    and dtype, its loss. `resolve_model` reads them back, after parsing."""
    from ..training.model_spec import INPUT_DTYPES
    p.add_argument("--model", default=default, help="%s (default: %%(default)s)" % help)
    p.add_argument("--model-args", metavar="K=V,...", default=None,
                   help="keyword arguments for the model's factory: key=value,key=value (values read as JSON "
                        "where they parse) or a JSON object")
    p.add_argument("--input-shape", metavar="C,H,W", default=None, action="append",
                   help="the shape of one sample the model takes (no batch axis), e.g. 3,32,32; needed for "
                        "module:factory models (a built-in or zoo model has its own); once per input for a "
                        "model that takes several")
    p.add_argument("--input-dtype", choices=INPUT_DTYPES, default="float32",
                   help="float32 (images, features) or int32 (token ids for an Embedding; with --vocab-size) "
                        "(default: %(default)s)")
    p.add_argument("--vocab-size", type=positive_int, default=None, metavar="N",
                   help="with --input-dtype int32: token ids are drawn from 0..N-1")
    p.add_argument("--loss", metavar="MODULE:FACTORY", default=None,
                   help="a function returning the gluon Loss to train with, called loss(output, label) "
                        "(default: softmax cross-entropy over the classes)")
