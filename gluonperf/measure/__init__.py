"""What measures: the harness, memory, traces, the machine's ceiling, FLOPs, load, the statistics (intervals, verdicts), and the comparison of two runs' records."""
