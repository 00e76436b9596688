"""python -m gluonperf.workers.memory '<json>': one variant of `bench memory` in a fresh process
(`experiments.asynchronous.run_memory_variant` starts it), so that allocator warm-up and the
order of the variants cannot decide the result; its row as one JSON line.
"""
from ..runtime.wire import worker_main


def memory_variant(params):
    """`train_with_sync` of these settings ('ctx' a string like 'cpu0'; 'trace' a path or absent)."""
    from ..experiments.asynchronous import TrainLoop, train_with_sync
    from ..measure.trace import Trace
    from ..runtime.contexts import parse_contexts
    params = dict(params)
    ctx = parse_contexts(params.pop("ctx"))[0]
    trace = Trace(params.pop("trace", None))
    row = train_with_sync(ctx, TrainLoop(**params), trace)
    trace.dump()
    return row


if __name__ == "__main__":
    worker_main(memory_variant, __spec__.name, "python -m gluonperf.bench memory")
