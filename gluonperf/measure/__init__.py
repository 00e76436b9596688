"""What measures: the harness, memory, traces, the machine's ceiling, FLOPs, load, and the statistics (intervals, verdicts)."""
