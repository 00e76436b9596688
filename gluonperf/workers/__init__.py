"""The processes gluonperf's commands start, never run by users; in the import layers they sit with
the commands, and no area imports them (a parent names the module it starts).

- `steprate`: tune's worker, one per candidate setting; `allreduce`, `exchange`: a Horovod rank
  (the code inside it: `allreduce_rank`, `exchange_rank`);
- `memory`, `footprint`: bench memory's and bench footprint's; `coldstart`, `primitives`,
  `serving`: infer's cold start, its oneDNN verbose reader, one of its instances (byte lines);
- `script_site/`, `launch_site/`: folders put first on a child's PYTHONPATH whose sitecustomize
  runs in it: the user's script's hooks (`profile --`, `tune --`), launch's workers' exit guard.

`memory`, `footprint`, `coldstart` and `primitives` take one JSON argument and answer with one
line, the wire's schema-versioned answer (`runtime/wire.py`: `transport.run_worker` in the
parent, `wire.worker_main` here); `steprate` answers the same way, fresh or warm (`wire.serve`).
"""
