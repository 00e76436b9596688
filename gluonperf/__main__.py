"""`python -m gluonperf`: the commands there are (each has its own --help)."""
import sys

COMMANDS = [
    ("bench", None),  # the chapter's experiments, named by gluonperf.bench (_bench)
    ("train", "data-parallel training with gluon.Trainer on one or more contexts"),
    ("profile", "where a training step's time goes, held against this machine's ceiling"),
    ("tune", "which settings make a model train fastest on this machine"),
    ("predict", "how far data parallelism scales, from measured parts"),
    ("infer", "how fast a model answers deployed: MLPerf's scenarios, precision rungs, instances x threads"),
    ("launch", "run a job on MXNet's parameter-server kvstore (dist_sync)"),
    ("dataset", "make a small image data set offline (a folder of JPEGs, and its .rec)"),
    ("compare", "compare two saved runs"),
    ("report", "one HTML page of saved results"),
]


def _bench():
    from .bench import SUBCOMMANDS
    return "the chapter's experiments: " + ", ".join(m.NAME for m in SUBCOMMANDS)


def main(argv=None):
    """`gluonperf` (the console script) and `python -m gluonperf`: without a command, the list
    of commands; with one, that command (`gluonperf bench hybridize` runs exactly what
    `python -m gluonperf.bench hybridize` runs: the module as __main__, with these arguments)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in dict(COMMANDS):
        import runpy
        sys.argv = ["gluonperf " + argv[0]] + argv[1:]  # run_module sets sys.argv[0] to the module's file
        runpy.run_module("gluonperf." + argv[0], run_name="__main__", alter_sys=True)
        return 0
    if argv and argv[0] not in ("-h", "--help"):
        print("gluonperf: error: %r is not a command; run gluonperf <command> (or python -m gluonperf.<command>), "
              "e.g. python -m gluonperf.bench --help" % argv[0], file=sys.stderr)
        return 2
    print("usage: gluonperf <command> [--help]  (or python -m gluonperf.<command> [--help])\n\ncommands:")
    for name, what in COMMANDS:
        print("  %-8s %s" % (name, what or _bench()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
