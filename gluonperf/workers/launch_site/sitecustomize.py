"""Exit guard for workers started by `python -m gluonperf.launch` (put first on PYTHONPATH).

A dist_sync worker that fails waits at exit in the kvstore's barrier (the KVStoreDist
destructor) for the others, which wait for its gradients: the job hangs. In a worker (DMLC_ROLE
worker) this guard notes a failure (an uncaught exception, or sys.exit with a non-zero code)
and, after the atexit handlers, leaves with os._exit(code), skipping that barrier; a
successful exit is untouched. Its limits: docs/commands/launch.md. In every process it also
puts back, on numpy 1.24 and later, the aliases MXNet 1.9.1 needs, once mxnet is first imported
(gluonperf/runtime/numpy_aliases.py, loaded by its path; docs/install.md). Any other
sitecustomize on the path is loaded afterwards, as if this one were not here.
"""
import atexit
import importlib.machinery
import importlib.util
import os
import sys

_failure = []          # the exit code of a failure, once one is seen
_exit = sys.exit
_excepthook = sys.excepthook


def _note_exit(code=None):
    if code not in (None, 0):
        _failure[:] = [code if isinstance(code, int) else 1]
    _exit(code)


def _note_exception(kind, value, tb):
    _failure[:] = [1]
    _excepthook(kind, value, tb)


def _leave_without_barrier():
    if _failure:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(_failure[0])


def _restore_numpy_aliases_before_mxnet():
    here = os.path.dirname(os.path.abspath(__file__))  # gluonperf/workers/launch_site
    path = os.path.join(os.path.dirname(os.path.dirname(here)), "runtime", "numpy_aliases.py")
    spec = importlib.util.spec_from_file_location("_gluonperf_numpy_aliases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.restore_before_mxnet()


try:
    _restore_numpy_aliases_before_mxnet()
except Exception as e:  # noqa: BLE001 (the command runs on; MXNet's own import error says the rest)
    sys.stderr.write("gluonperf: could not prepare numpy's aliases for MXNet (%s: %s)\n" % (type(e).__name__, e))

if os.environ.get("DMLC_ROLE") == "worker":
    atexit.register(_leave_without_barrier)  # registered first: runs after all other handlers
    sys.exit = _note_exit
    sys.excepthook = _note_exception

# chain to the sitecustomize this one shadows, if any: the next one on the path after this folder
# (not one before it, which has run already: profile's hooks load this one when the script launches)
_here = os.path.dirname(os.path.abspath(__file__))
_paths = [os.path.abspath(p or ".") for p in sys.path]
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", sys.path[_paths.index(_here) + 1:] if _here in _paths else sys.path)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
