"""What measures: the harness, memory, traces, the machine's ceiling, FLOPs, load, the statistics (intervals, verdicts), and the comparison of two runs' records.
Also what profile --model (experiments/) and profile -- (script/) share: a model's Blocks timed alone and its training step (`blocks`), the operators of a profiled step (`operators`), the tables' columns (`profile_columns`)."""
