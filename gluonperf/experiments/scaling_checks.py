"""What `experiments/engines.py` imports from here, whose code moved to `gluonperf.scaling.runs`
(issue 62, part A: the scaling package). engines.py was being changed by another developer
then; issue 62's part B points it at `gluonperf.scaling.runs` and removes this module."""
from ..scaling.runs import epoch_steps as _epoch_steps, mean_step as _mean_step, run_train as _run_train  # noqa: F401
