"""numpy's aliases of Python's own types that MXNet 1.9.1 still uses, put back where numpy
removed them: the one place gluonperf does that (Python 3.12 only, in practice).

`restore()` sets, on numpy 1.24 and later only, each of `np.bool`, `np.int`, `np.float`,
`np.complex`, `np.object` and `np.str` that numpy lacks to the builtin it named; nothing else
of numpy changes. `restore_before_mxnet()` does it at the moment something first imports
`mxnet`, so a process that never loads MXNet imports no numpy for it. Applied before anything
imports MXNet by gluonperf/__init__.py (every command, and library users who import gluonperf
first), gluonperf/workers/script_site/sitecustomize.py (a script under `profile --` and
`tune --`) and gluonperf/workers/launch_site/sitecustomize.py (`launch`'s workers).

The one thing to know: all three load this file by its path, so it must stay importable on its
own (the standard library only, and numpy once MXNet is imported). Why MXNet needs it, and
when to delete it: docs/install.md, "Python versions".
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
