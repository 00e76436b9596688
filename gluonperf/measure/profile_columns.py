"""The columns of profile's operator and Blocks tables, the same for a model of gluonperf's
(`profile --model`: experiments/step_time.py, measure/blocks.py) and for a user's
script (`profile -- python train.py`: gluonperf/script/tables.py). Plain data, no MXNet."""

OPERATOR_COLUMNS = ["op", "phase", "calls_per_step", "time_s", "share", "gflop_per_s", "of_ceiling"]
BLOCK_COLUMNS = ["tree", "parameters", "forward_gflop", "training_gflop", "forward_s", "backward_s", "step_share",
                 "gflop_per_s", "of_ceiling", "note"]
TOP_OPERATORS = 15  # the operators a table shows, the slowest first
