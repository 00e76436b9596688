"""A user's script, profiled (`profile -- python train.py`) and tuned (`tune -- python train.py`)
from outside; filled in by the moves that follow (issue 62)."""
