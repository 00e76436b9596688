"""The processes gluonperf's commands start, never run by users: tune's steprate worker
(`python -m gluonperf.workers.steprate`, one per candidate setting, `--runner steprate`) and
Horovod's per-rank allreduce (`python -m gluonperf.workers.allreduce`, one per rank under
horovodrun, for `bench allreduce --methods horovod`). Each parses its flags and prints or
writes what the experiment below it measured; in the import layers they sit with the commands.
"""
