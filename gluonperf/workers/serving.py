"""python -m gluonperf.workers.serving: one instance of infer's system under test, a worker process
that serves one rung.

Started by `inference.instances.Pool` as `python -m gluonperf.workers.serving '<json>'`, with its
OMP_NUM_THREADS set; `main` pins it to its cores (before MXNet loads, so that MXNet's OpenMP
threads inherit them), and `serve` loads the rung (`ladder.load`), maps the sample library and
answers the parent's requests, one line each, on its stdout (its own prints go to stderr; the
protocol: `serve`). An error is one line on stderr, exit 1. This module never starts a process.
How infer runs its instances: docs/commands/infer.md, "How it works".
"""
import collections
import os
import statistics
import sys
import time


def batch(forward, library, indices, ctx):
    """The samples at `indices` as `forward` takes them: numpy for a runtime's rung (its forward
    says `numpy_in`: an NDArray would be one more copy on its way in), else an NDArray on `ctx`."""
    data = library.take(indices)
    if getattr(forward, "numpy_in", False):
        return data
    import mxnet as mx
    return mx.nd.array(data, ctx=ctx)


def _calls(forward, library, ctx, size, calls):
    """`calls` synced calls of a batch of `size`; the seconds of each."""
    import mxnet as mx
    indices = [i % len(library) for i in range(size)]
    spent = []
    for _ in range(calls):
        start = time.perf_counter()
        forward(batch(forward, library, indices, ctx))
        mx.nd.waitall()
        spent.append(time.perf_counter() - start)
    return spent


def shapes_line(served, warmed):
    """`s`'s answer line, e.g. `s 1:40,8:3 -`: the sizes served with their calls; those never warmed."""
    def words(items):
        return ",".join(items) or "-"
    return ("s %s %s\n" % (words("%d:%d" % kv for kv in sorted(served.items())),
                           words(str(size) for size in sorted(set(served) - set(warmed))))).encode()


def serve(config, stdin, stdout):
    """Answer the parent's lines until `q` or the end of `stdin` (binary streams), one line each:

        stdin                     stdout
        (start-up)                ready
        w CALLS SIZE SIZE ...     t SIZE:SECONDS ...          warm-up: CALLS calls a size
        c ID INDEX INDEX ...      d ID                        a batch of those samples, synced
        s                         s SIZE:CALLS,... COLD,...   the batch sizes served since the
                                                              last s; those never warmed up
        q, or end of input        (exits 0)

    SECONDS is the median call after the first at that size: a hint for LoadGen's expected
    latency and rate, never a result (LoadGen keeps the clock). `s` answers `-` for an empty
    list. A batch of a size the warm-up did not run builds the graph again for its shape inside
    a measured query (a static_shape graph plans anew): the parent pads its batches to warmed
    sizes, and `s` lets it record that none slipped through."""
    import mxnet as mx
    from ..inference.ladder import Rung, load
    from ..inference.samples import SampleLibrary
    from ..runtime.contexts import parse_contexts
    ctx = parse_contexts(config["ctx"])[0]
    forward = load(Rung.from_text(config["rung"]), ctx)
    warmed, served = set(), collections.Counter()
    with SampleLibrary.attach(config["samples"]) as library:
        stdout.write(b"ready\n")
        stdout.flush()
        for line in stdin:
            words = line.split()
            if not words or words[0] == b"q":
                break
            if words[0] == b"c":
                forward(batch(forward, library, [int(w) for w in words[2:]], ctx))
                mx.nd.waitall()
                served[len(words) - 2] += 1
                stdout.write(b"d " + words[1] + b"\n")
            elif words[0] == b"w":
                calls = int(words[1])
                times = {int(w): _calls(forward, library, ctx, int(w), calls) for w in words[2:]}
                warmed.update(times)
                stdout.write(("t %s\n" % " ".join("%d:%.6g" % (size, statistics.median(t[1:] or t))
                                                  for size, t in times.items())).encode())
            elif words[0] == b"s":
                stdout.write(shapes_line(served, warmed))
                served.clear()
            else:
                raise ValueError("unknown request %r" % line[:40])
            stdout.flush()


def main(config):
    if config.get("cores"):
        os.sched_setaffinity(0, config["cores"])
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not break the protocol
    try:
        serve(config, sys.stdin.buffer, protocol)
    except Exception as e:  # noqa: BLE001 (one line for the parent, which reports it)
        from .. import error_line
        sys.stderr.write("instance %s: %s: %s\n" % (config.get("instance"), type(e).__name__, error_line(e)))
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__":
    from ..runtime.wire import worker_main
    worker_main(main, __spec__.name, "python -m gluonperf.infer")
