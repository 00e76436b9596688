"""`python -m gluonperf`: the commands there are (each has its own --help)."""
import sys

COMMANDS = [
    ("bench", "the chapter's experiments: hybridize, async, memory, parallel, overlap, allreduce, scratch, "
              "footprint, optimizers, input, time-to-accuracy"),
    ("train", "data-parallel training with gluon.Trainer on one or more contexts"),
    ("profile", "where a training step's time goes, held against this machine's ceiling"),
    ("tune", "which settings make a model train fastest on this machine"),
    ("predict", "how far data parallelism scales, from measured parts"),
    ("launch", "run a job on MXNet's parameter-server kvstore (dist_sync)"),
    ("dataset", "make a small image data set offline (a folder of JPEGs, and its .rec)"),
    ("compare", "compare two saved runs"),
    ("report", "one HTML page of saved results"),
]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] not in ("-h", "--help"):
        print("python -m gluonperf: error: %r is not an option here; run python -m gluonperf.<command>, e.g. "
              "python -m gluonperf.%s --help" % (argv[0], argv[0] if argv[0] in dict(COMMANDS) else "bench"),
              file=sys.stderr)
        return 2
    print("usage: python -m gluonperf.<command> [--help]\n\ncommands:")
    for name, what in COMMANDS:
        print("  %-8s %s" % (name, what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
