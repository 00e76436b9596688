"""python -m gluonperf.workers.footprint '<json>': one configuration of `bench footprint` in a
fresh process (`experiments.footprint.run_step_footprint` starts it), so that each peak is its
own process's; its row as one JSON line.
"""
from ..runtime.wire import worker_main


def step_footprint(params):
    """`experiments.footprint.step_footprint` of these settings ('contexts' a string like 'cpu0,cpu1')."""
    from ..experiments import footprint
    from ..runtime.contexts import parse_contexts
    return footprint.step_footprint(**dict(params, contexts=parse_contexts(params["contexts"])))


if __name__ == "__main__":
    worker_main(step_footprint, __spec__.name, "python -m gluonperf.bench footprint")
