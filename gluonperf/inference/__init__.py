"""Inference as users deploy it: `python -m gluonperf.infer` (issue 61)."""
