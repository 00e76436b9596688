"""python -m gluonperf.workers.footprint '<json>': one configuration of `bench footprint` in a
fresh process (`experiments.footprint.run_step_footprint` starts it), so that each peak is its
own process's; its row as one JSON line.
"""
from ..runtime.wire import worker_main


def step_footprint(params):
    """`experiments.footprint.step_footprint` of these settings: a StepSettings' fields ('contexts' a
    string like 'cpu0,cpu1'), `batch_size`, `hybridize` and `checkpoint`."""
    from ..experiments import footprint
    from ..runtime.contexts import parse_contexts
    params = dict(params, contexts=parse_contexts(params["contexts"]))
    batch_size, hybridize, checkpoint = params.pop("batch_size"), params.pop("hybridize"), params.pop("checkpoint")
    return footprint.step_footprint(footprint.StepSettings(**params), batch_size, hybridize, checkpoint)


if __name__ == "__main__":
    worker_main(step_footprint, __spec__.name, "python -m gluonperf.bench footprint")
