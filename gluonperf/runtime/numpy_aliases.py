"""numpy's aliases of Python's own types that MXNet 1.9.1 still uses, put back where numpy
removed them: the one place gluonperf does that (Python 3.12 only, in practice).

Why: numpy 1.20 deprecated `np.bool`, `np.int`, `np.float`, `np.complex`, `np.object` and
`np.str` (each was the builtin of that name) and numpy 1.24 removed them. MXNet 1.9.1, its last
release, uses `np.bool` when it loads (mxnet/numpy/utils.py, `bool = onp.bool`), and `np.bool`
and `np.int` in its boolean indexing, `mx.np.zeros(dtype=None)` for booleans and its test
utilities; GluonCV 0.10.5 uses `np.float` and `np.int` (Faster R-CNN's anchors, HRNet, its COCO
metric). On Python 3.8 to 3.11 gluonperf installs numpy<1.24, where they are all there, and
this changes nothing. Python 3.12 has no numpy wheel below 1.26, and MXNet 1.9.1 needs a numpy
below 2, so pyproject.toml installs numpy 1.26 there; with the aliases back, MXNet runs on it.

What: `restore()` sets, on numpy 1.24 and later only, each of those six names that numpy
lacks to the builtin it named, as numpy 1.23 had them (without 1.20-1.23's DeprecationWarning
on use). Nothing else of numpy changes. `restore_before_mxnet()` does the same at the moment
something first imports `mxnet`, so that a process that never loads MXNet imports no numpy for
it and sees no change.

Where it is applied, before anything imports MXNet:
- gluonperf/__init__.py, for every command (`python -m gluonperf.X` imports the package
  first) and for library users who import gluonperf before mxnet;
- gluonperf/workers/script_site/sitecustomize.py, in the processes of a user's own script
  under `profile --` and `tune --`, which import mxnet without gluonperf;
- gluonperf/workers/launch_site/sitecustomize.py, in `launch`'s workers (a user's command too).
All three load this file by its path (the package root imports nothing of gluonperf's, and a
user's script should not get the package), so it must stay importable on its own.

When to remove: when gluonperf no longer runs MXNet 1.9.1 on numpy 1.24 or later, i.e. when
Python 3.12 support goes or an MXNet release without these uses is installed. Then delete this
file, its three callers (search for `numpy_aliases`) and the python_version>='3.12' lines of
pyproject.toml. It imports only the standard library, and numpy when MXNet is imported.
"""
import sys

# numpy's removed aliases: name -> the builtin it was (numpy 1.24's `numpy.__former_attrs__`)
REMOVED_IN_1_24 = {"bool": bool, "int": int, "float": float, "complex": complex,
                   "object": object, "str": str}


def restore():
    """Put back the removed aliases numpy lacks; returns the names set (none on numpy < 1.24)."""
    import numpy

    version = tuple(int(p) for p in numpy.__version__.split(".")[:2] if p.isdigit())
    if version < (1, 24) or version >= (2,):  # below 1.24 they exist; numpy 2 MXNet cannot run on
        return []
    missing = [name for name in REMOVED_IN_1_24 if name not in vars(numpy)]
    for name in missing:
        setattr(numpy, name, REMOVED_IN_1_24[name])
    return missing


class _BeforeMXNet:
    """A meta path finder that calls `restore()` when `mxnet` is first looked for, and finds
    nothing itself (the usual finders load MXNet). It stays in sys.meta_path: taking itself out
    while the import system walks that list would make it skip the next finder."""

    done = False

    def find_spec(self, name, path=None, target=None):
        if name == "mxnet" and not self.done:
            self.done = True
            try:
                restore()
            except ImportError:  # no numpy: MXNet's own import says so
                pass
        return None


def restore_before_mxnet():
    """`restore()` now if MXNet is loaded already, else the first time `mxnet` is imported."""
    if "mxnet" in sys.modules:
        restore()
    elif not any(type(f).__name__ == "_BeforeMXNet" for f in sys.meta_path):  # once, if loaded twice
        sys.meta_path.insert(0, _BeforeMXNet())
