"""The processes gluonperf's commands start, never run by users; in the import layers they sit with
the commands, and no area imports them (a parent names the module it starts).

- `steprate`: tune's steprate worker, one per candidate setting (`--runner steprate`);
- `allreduce`, `exchange`: one Horovod rank under horovodrun (`bench allreduce --methods
  horovod`, `predict --validate horovod`);
- `memory`, `footprint`: one variant of `bench memory`, one configuration of `bench footprint`;
- `coldstart`, `primitives`: infer's cold start of one rung, and its reader of oneDNN's verbose lines;
- `serving`: one of infer's instances (its byte-line protocol: the module's docstring);
- `script_site/`, `launch_site/`: folders put first on a child's PYTHONPATH, whose sitecustomize runs
  in it: the user's script's hooks (`profile --`, `tune --`) and launch's workers' exit guard.

`memory`, `footprint`, `coldstart` and `primitives` take their settings as one JSON argument and
answer with one line, the wire's schema-versioned answer (`runtime/wire.py`; `transport.run_worker` in the
parent, `wire.worker_main` here); `steprate` answers the same way, in a fresh process or warm (`wire.serve`).
"""
