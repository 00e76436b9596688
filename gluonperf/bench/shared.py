"""What several bench subcommands share: the --trace flag, the notes on noisy and unstable
measurements, and the two devices of parallel and overlap. (Comma-separated lists and
sections of tables are every command's: gluonperf.cli.common.)"""
from ..cli import common as cli


def warn_unstable(results):
    """A note when the machine was unstable during the measurement (gluonperf.measure.machine)."""
    from ..measure.machine import warning_line
    line = warning_line(next((r.metrics["machine_warnings"] for r in results if r.metrics.get("machine_warnings")),
                             None))
    if line:
        cli.note("note: " + line)


def add_trace(p, what="one more run of the measured code, untimed, so the profiler's overhead stays "
                       "out of the timings"):
    p.add_argument("--trace", metavar="PATH",
                   help="also write an MXNet profiler trace (Chrome trace JSON: open in ui.perfetto.dev or "
                        "chrome://tracing) of %s" % what)


def dump_trace(trace):
    if trace:
        trace.dump()
        cli.note("wrote profiler trace %s (open in ui.perfetto.dev or chrome://tracing)" % trace.path)


def warn_noisy(results):
    if any(r.metrics.get("noisy") for r in results):
        cli.note("note: some results are noisy (IQR above 10% of the median); "
                 "close other work or raise --repeat")


def add_device_sizes(p, repeat):
    p.add_argument("--cpu-size", type=cli.positive_int, default=1000,
                   help="n of the n x n matrix on a CPU context (default: %(default)s)")
    p.add_argument("--gpu-size", type=cli.positive_int, default=6000,
                   help="n of the n x n matrix on a GPU context (default: %(default)s, as in the chapter)")
    p.add_argument("--products", type=cli.positive_int, default=10,
                   help="matrix products per run (default: %(default)s, as in the chapter)")
    p.add_argument("--repeat", type=cli.positive_int, default=repeat,
                   help="timed repeats of each variant, interleaved (default: %(default)s)")
    add_trace(p)


def pair_used(args, pick):
    from ..experiments import auto_parallel
    return list(getattr(auto_parallel, pick)(cli.contexts(args)))


def stand_in_note(stand_in):
    return " [no GPU: two CPU contexts stand in for two devices; they share the same cores]" if stand_in else ""
