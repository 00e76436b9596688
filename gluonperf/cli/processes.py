"""`--processes N`: one saved run made of N fresh processes, as pyperf makes its runs.

A process's level drifts from one process to the next (memory layout, the host's other
guests) by more than the samples inside one process can show. A file that holds N
processes' records of one benchmark carries that spread itself, so `compare` judges it with
Welch's t on the processes' values instead of widening one run by a noise floor
(docs/verdicts.md). The command runs once as usual (process 1: its table is the one
printed); then it starts itself N-1 more times, one after another, each with its own
`--json` into a temporary file, and every process's records go to the `--json` file, each
with `process` (1..N). A line per benchmark then says the spread from process to process.
"""
import math
import os
import statistics
import subprocess
import sys

from .. import UserError
from ..runtime import guard
from ..runtime.wire import PROCESS

CHILD = PROCESS  # set in the children: which process of N this is


def add_processes(p):
    p.add_argument("--processes", type=_processes, default=1, metavar="N",
                   help="run the whole command in N fresh processes, one after another, and keep every "
                        "process's records in --json: a saved run that carries its own process-to-process "
                        "spread, which compare then uses instead of a noise floor (default: %(default)s)")


def _processes(text):
    import argparse
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text)
    if not 1 <= n <= 100:
        raise argparse.ArgumentTypeError("%r must be between 1 and 100" % text)
    return n


def wanted(args):
    """How many more processes to start: 0 in a child or with --processes 1."""
    return 0 if os.environ.get(CHILD) else max(0, getattr(args, "processes", 1) - 1)


def _child_argv(argv, json_path):
    """The command line of a child: `argv` without --processes, --json, --csv (and their
    values), with --json `json_path`."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in ("--processes", "--json", "--csv"):
            skip = "=" not in a
            continue
        out.append(a)
    return out + ["--json", json_path]


def more_processes(args, progress=None):
    """Run this command again in `wanted(args)` fresh processes, one after another; their
    records, each marked with `process` (2..N). A child that fails stops the run with its
    error line (UserError)."""
    from ..records import read_jsonl
    n = wanted(args)
    if not n:
        return []
    main = sys.modules["__main__"]
    module = getattr(getattr(main, "__spec__", None), "name", None)
    if not module:
        raise UserError("--processes needs the command run as python -m gluonperf...")
    records = []
    with guard.temp_dir(prefix="gluonperf-processes-") as tmp:
        for i in range(2, n + 2):
            path = os.path.join(tmp, "process%d.json" % i)
            argv = [sys.executable, "-m", module] + _child_argv(sys.argv[1:], path)
            env = dict(os.environ, **{CHILD: str(i)})
            guard.beat("process %d of %d (starting)" % (i, n + 1))
            proc = guard.popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            err = _wait_beating(proc, "process %d of %d" % (i, n + 1))
            if proc.returncode != 0:
                raise UserError("--processes: process %d of %d failed (exit %d): %s"
                                % (i, n + 1, proc.returncode, guard.last_line(err, "no message")))
            for r, _ in read_jsonl(path):
                r.metrics["process"] = i
                records.append(r)
            if progress:
                progress()
    return records


def _wait_beating(proc, what):
    """Wait for `proc`, telling the stall guard every half second that a child is working
    (its own guard watches its steps); its stderr."""
    while True:
        guard.beat(what)
        try:
            return proc.communicate(timeout=0.5)[1]
        except subprocess.TimeoutExpired:
            pass


def spread_lines(records):
    """'static: median_s over 4 processes 8.17 ms, process-to-process SD 6.1%' per benchmark
    whose records come from several processes."""
    from ..measure.comparison import key, pick_metric, positive
    from ..records import format_value
    groups = {}
    for r in records:
        if "process" in r.metrics:
            groups.setdefault(key(r), []).append(r)
    out = []
    for rs in groups.values():
        m = pick_metric(rs[0], rs[0])  # a positive number in the first process's record
        values = [float(r.metrics[m]) for r in rs if m is not None and positive(r.metrics.get(m))]
        if len(values) < 2:
            continue
        sd = statistics.stdev(math.log(v) for v in values)
        out.append("%s: %s over %d processes %s, process-to-process SD %.1f%%"
                   % (rs[0].name, m, len(values), format_value(m, statistics.median(values)), 100 * sd))
    return out
