"""`bench allreduce`: the allreduce's bandwidth per method, tensor size and number of contexts.

`allreduce_bandwidth` measures the three schedules of `from_scratch.allreduce` (book, ring,
tree), MXNet's kvstores (device, local) and Horovod's allreduce against a plain copyto, the
ceiling, interleaved; `horovod_allreduce` runs Horovod's in one process per context, started
by horovodrun (`runtime.horovod_launcher`), whose ranks run `workers.allreduce_rank`
through `python -m gluonperf.workers.allreduce`, and reads what rank 0 writes. Nothing here
parses arguments or prints.
"""
import collections
import json
import os
import queue
import subprocess
import sys
import threading
import time

import mxnet as mx
from mxnet import nd

from .. import UserError
from .. import config
from ..measure.harness import Benchmark, Measurement, measure_interleaved
from ..runtime import guard, horovod_launcher
from ..runtime.contexts import describe
from ..records import result
from .from_scratch import METHODS, SCHEDULES, allreduce, check_method, received_bytes
from ..measure.timing import Timing


def _format_size(nbytes):
    for unit, scale in (("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return "%g %s" % (nbytes / scale, unit)
    return "%d B" % nbytes


def _kvstore_allreduce(kind, arrays):
    """push+pull of `arrays` through a kvstore of `kind`; the key is initialised here, once."""
    kv = mx.kv.create(kind)
    kv.init(0, nd.zeros(arrays[0].shape, ctx=arrays[0].context))

    def step():
        kv.push(0, arrays)
        kv.pull(0, out=arrays)
    return step


def _check_sum(fn, arrays):
    """Run `fn` once on arrays holding 1, 2, ..., k and return the largest error of the sum."""
    k = len(arrays)
    for i, a in enumerate(arrays):
        a[:] = i + 1
    fn()
    expected = k * (k + 1) / 2
    err = max(float(nd.abs(a - expected).max().asscalar()) for a in arrays)
    for a in arrays:
        a[:] = 0  # timed runs sum zeros: no overflow however often they repeat
    return err


KVSTORES = config.ALLREDUCE_KVSTORES  # handled by _kvstore_allreduce
HOROVOD = config.ALLREDUCE_HOROVOD  # handled by horovod_allreduce, in processes of its own


def calls_per_repeat(slowest_s, target_s):
    """Calls per timed repeat so that a repeat of the slowest variant takes about `target_s`."""
    return max(1, min(1000, int(round(target_s / max(slowest_s, 1e-9)))))


def allreduce_bandwidth(ctxs, sizes, counts=(2, 3, 4), methods=None, timing=Timing(number=None), target_s=0.05,
                        reuse_buffers=False, horovod_timeout=300.0):
    """Allreduce bandwidth per method, tensor size (bytes, float32) and number of contexts.

    `methods` are names from METHODS and KVSTORES, and HOROVOD (default: METHODS and
    KVSTORES). Every group (size, number of contexts) is measured interleaved, together
    with a plain copyto of the same array from ctxs[0] to ctxs[1], the ceiling. Bandwidth
    counts the bytes each context must receive in an allreduce of N bytes over k contexts,
    2(k-1)/k * N (as NCCL's 'bus bandwidth'), per second, so that a perfect allreduce
    matches the copy. `timing` gives the repeats, the warm-up and the progress; its `number`
    calls per repeat is chosen so a repeat of the slowest variant takes about `target_s` unless
    given. With `reuse_buffers` the from-scratch methods keep
    their receive buffers between calls (see `allreduce`). HOROVOD runs in k processes of
    its own (`horovod_allreduce`, all sizes in one job per k, before the group's other
    variants; `horovod_timeout` as there), with the same repeats, warm-up and rule for
    `number`, and its rows are computed as the others'. Returns one Result per variant and
    group.
    """
    methods = list(methods or METHODS + KVSTORES)
    for m in methods:
        if m not in KVSTORES and m != HOROVOD:
            check_method(m)
    local = [m for m in methods if m != HOROVOD]
    if len(ctxs) < 2:
        raise UserError("allreduce needs at least 2 contexts; got %d" % len(ctxs))
    for k in counts:
        if not 2 <= k <= len(ctxs):
            raise UserError("cannot allreduce over %d contexts with %d given (%s)"
                            % (k, len(ctxs), ",".join(map(str, ctxs))))
    results = []
    for k in counts:
        horovod = {}
        if HOROVOD in methods:
            horovod = horovod_allreduce(ctxs[:k], sizes, timing, target_s, horovod_timeout)
        for nbytes in sizes:
            n = max(1, nbytes // 4)
            nbytes = 4 * n
            arrays = [nd.zeros(n, ctx=c) for c in ctxs[:k]]
            src, dst = nd.zeros(n, ctx=ctxs[0]), nd.zeros(n, ctx=ctxs[1])
            fns, errors = {}, {}
            for m in local:
                fns[m] = _kvstore_allreduce(m[3:], arrays) if m in KVSTORES else \
                    (lambda m=m, b={} if reuse_buffers else None: allreduce(arrays, m, b))
                errors[m] = _check_sum(fns[m], arrays)
            fns["copyto"] = lambda: src.copyto(dst)
            calls = timing.number
            if calls is None:
                slowest = 0.0
                for fn in fns.values():
                    fn()  # first call allocates
                    with Benchmark() as b:
                        fn()
                    slowest = max(slowest, b.seconds)
                calls = calls_per_repeat(slowest, target_s)
            measured = measure_interleaved(fns, warmup=timing.warmup, repeat=timing.repeat, number=calls,
                                           progress=timing.progress)
            if horovod:
                measured[HOROVOD], errors[HOROVOD] = horovod[nbytes]
                measured = {name: measured[name] for name in methods + ["copyto"]}  # in the order of `methods`
            need = 2 * (k - 1) / k * nbytes  # bytes each context must receive
            ceiling = nbytes / measured["copyto"].median / 1e9
            for name, m in measured.items():
                if name == "copyto":
                    bus, alg, recv = ceiling, ceiling, 1.0
                else:
                    bus, alg = need / m.median / 1e9, nbytes / m.median / 1e9
                    recv = max(received_bytes(name, k, n)) / n if name in SCHEDULES else None
                results.append(result(
                    "allreduce", name, m, contexts=k, size=_format_size(nbytes), elements=n,
                    tensor_bytes=nbytes, bus_GBps=bus, alg_GBps=alg, of_ceiling=bus / ceiling,
                    max_recv=recv, max_abs_err=errors.get(name, 0.0),
                    reuse_buffers=reuse_buffers if name in SCHEDULES else None))
    return results


# --- Horovod's allreduce, in one process per context -----------------------------

WORKER = "gluonperf.workers.allreduce"  # the command each rank runs: workers.allreduce_rank.horovod_rank, results to a file
PROGRESS = "gluonperf-allreduce: repeat done"  # rank 0's line after each timed repeat


def _job_error(lines):
    """The line that says why a Horovod job failed: a rank's one-line error (without
    horovodrun's `[rank]<stderr>:` prefix), else horovodrun's own, else the last line."""
    for line in lines:
        if ": error: " in line:
            return line.split(">:", 1)[-1] if line.startswith("[") else line
    for line in lines:
        if line.startswith("horovodrun: "):
            return line
    return lines[-1] if lines else "no output"


def horovod_allreduce(ctxs, sizes, timing=Timing(number=None), target_s=0.05, timeout=300.0):
    """Horovod's allreduce (`hvd.allreduce_`, sum) of one float32 tensor of each size over
    len(ctxs) processes, one per context, started by horovodrun with Gloo on this machine
    (`horovod_launcher.plan`; each process runs `workers.allreduce_rank.horovod_rank` through `python -m
    gluonperf.workers.allreduce`). The repeats are timed as `allreduce_bandwidth` times the
    in-process variants, and each repeat's time is the slowest rank's (see `workers.allreduce_rank.horovod_rank`).

    The job runs in a process group of its own, registered with the guard (a signal or a
    stall of this process stops it); when it goes `timeout` seconds without finishing a
    repeat (its start-up included), or fails, the whole group is stopped and a UserError
    says why. `timing.progress`, if given, is called after each timed repeat (of any size).
    Returns {tensor_bytes: (Measurement, max_abs_err)}, tensor_bytes as rounded to whole float32s.
    """
    if len(ctxs) < 2:
        raise UserError("a Horovod allreduce needs at least 2 processes; got %d context(s)" % len(ctxs))
    if not sizes:
        raise UserError("no tensor sizes to allreduce")
    repeat, warmup, number, progress = timing.repeat, timing.warmup, timing.number, timing.progress
    if repeat < 1 or warmup < 0 or (number is not None and number < 1):
        raise ValueError("repeat and number must be >= 1 and warmup >= 0")
    if not timeout > 0:
        raise ValueError("timeout must be a positive number of seconds, got %r" % (timeout,))
    k = len(ctxs)
    sizes = [4 * max(1, int(b) // 4) for b in sizes]
    with guard.temp_dir(prefix="gluonperf-allreduce-") as tmp:
        out = os.path.join(tmp, "horovod.json")
        command = [sys.executable, "-m", WORKER, "--ctx", describe(ctxs),
                   "--sizes", ",".join(map(str, sizes)), "--repeat", str(repeat), "--warmup", str(warmup),
                   "--target-s", repr(float(target_s)), "--out", out]
        if number is not None:
            command += ["--number", str(number)]
        node, = horovod_launcher.plan(command, k)
        env = guard.package_env(dict(os.environ, **node.env))
        proc = guard.popen(node.argv(), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        lines = collections.deque(maxlen=200)
        arrived = queue.Queue()

        def read():
            for line in proc.stdout:
                arrived.put(line.rstrip("\n"))
            arrived.put(None)

        threading.Thread(target=read, name="gluonperf-horovod-output", daemon=True).start()
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    line = arrived.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise UserError("the Horovod allreduce over %d processes made no progress for %g s "
                                    "(last line: %s); stopped it" % (k, timeout, lines[-1] if lines else "none")) from None
                if line is None:
                    break
                if PROGRESS in line:
                    deadline = time.monotonic() + timeout
                    if progress is not None:
                        progress()
                else:
                    lines.append(line)
            code = proc.wait()
            # a signal or the stall guard stopped the job and ends this process: whatever the job's exit
            # (horovodrun can exit 0 once its ranks are killed), its end is not a result nor a failure
            guard.hold_if_stopping()
            if code != 0:
                raise UserError("the Horovod allreduce over %d processes failed (%s): %s"
                                % (k, "exit code %d" % code if code > 0 else "signal %d" % -code,
                                   _job_error(list(lines))))
            try:
                with open(out) as f:
                    found = json.load(f)
            except (OSError, ValueError) as e:
                raise UserError("the Horovod allreduce over %d processes wrote no results (%s)" % (k, e)) from None
        finally:
            guard.kill_group(proc)  # the job's processes, whatever happened; a no-op once all exited
    return {row["tensor_bytes"]: (Measurement(HOROVOD, tuple(row["samples_s"]), row["number"],
                                              faults=tuple(row["faults"]) if row["faults"] else None),
                                  row["max_abs_err"])
            for row in found["sizes"]}
