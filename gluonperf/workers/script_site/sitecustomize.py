"""The hooks of `python -m gluonperf.profile -- COMMAND` (and `tune -- COMMAND`), loaded at the
start of every Python process the command runs (first on its PYTHONPATH: script/wire.py).
It runs before gluonperf can be imported, so it loads what it needs of gluonperf by path:
runtime/wire.py (the variables' names), runtime/numpy_aliases.py and runtime/operator_code.py.

It changes nothing the script can see but numpy's aliases for MXNet and MXNet's operator
functions from gluonperf's cache (docs/your_script.md, "Your environment"). Once the script
imports MXNet, an import hook calls the function GLUONPERF_SCRIPT_HOOKS names
(script.driver.install or script.listener.install), imported from GLUONPERF_SCRIPT_ROOT. The
mark GLUONPERF_SCRIPT_OUT/<pid>.site tells a script that never imported MXNet from a command
that never ran this file (`python -E`). A parameter-server job's scheduler and servers are left
alone; a failure here is one line on stderr, never the script's.
"""
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types

_HERE = os.path.dirname(os.path.abspath(__file__))
_MARK = "_gluonperf_script_site"  # in sys.modules once this file has run in the process
_wire = None  # gluonperf/runtime/wire.py, loaded by `_install`


def _say(text):
    sys.stderr.write("gluonperf: %s\n" % text)
    sys.stderr.flush()


def _after_mxnet():
    """Import the hooks' module from GLUONPERF_SCRIPT_ROOT's gluonperf and call its function."""
    module_name, _, function = os.environ.get(_wire.SCRIPT_HOOKS, "").partition(":")
    if not module_name or not function:
        return
    root = os.environ.get(_wire.SCRIPT_ROOT)
    added = bool(root) and root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    finally:
        if added:
            sys.path.remove(root)
    getattr(module, function)()


class _WhenMXNetLoads:
    """A meta path finder that, once `mxnet` has been executed, calls `_after_mxnet`."""

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet":
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            try:
                _after_mxnet()
            except Exception as e:  # noqa: BLE001 (the script runs on, unprofiled)
                _say("could not hook the script (%s: %s); it runs unprofiled" % (type(e).__name__, e))
        spec.loader.exec_module = exec_module
        return spec


def _install():
    global _wire
    _wire = _runtime_file("wire")
    out = os.environ.get(_wire.SCRIPT_OUT)
    if not out or os.environ.get("DMLC_ROLE") in ("scheduler", "server"):
        return
    try:
        open(os.path.join(out, "%d.site" % os.getpid()), "w").close()
    except OSError:
        return  # the command is gone (its folder removed): nothing to report to
    if "mxnet" in sys.modules:  # loaded before this ran (a sitecustomize earlier on the path)
        _after_mxnet()
    else:
        sys.meta_path.insert(0, _WhenMXNetLoads())


def _runtime_file(name):
    """gluonperf/runtime/NAME.py, from this gluonperf's folder (not through the gluonperf
    package, whose import would change more of the process)."""
    path = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "runtime", name + ".py")
    spec = importlib.util.spec_from_file_location("_gluonperf_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chain():
    """Load the sitecustomize that comes after this one on sys.path, as if this one were not here."""
    paths = [os.path.abspath(p or ".") for p in sys.path]
    after = sys.path[paths.index(_HERE) + 1:] if _HERE in paths else [p for p, a in zip(sys.path, paths)
                                                                       if a != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", after)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["sitecustomize"] = module  # `import sitecustomize` finds the user's, as without gluonperf


if _MARK not in sys.modules:  # once per process, however often the chain of sitecustomizes comes back here
    sys.modules[_MARK] = types.ModuleType(_MARK)
    try:
        _runtime_file("numpy_aliases").restore_before_mxnet()
    except Exception as e:  # noqa: BLE001
        _say("could not prepare numpy's aliases for MXNet (%s: %s)" % (type(e).__name__, e))
    try:
        _runtime_file("operator_code").install()  # after numpy_aliases' hook, which must see `mxnet` first
    except Exception as e:  # noqa: BLE001 (MXNet compiles its operators as usual)
        _say("could not use the cache of MXNet's operator code (%s: %s)" % (type(e).__name__, e))
    try:
        _install()
    except Exception as e:  # noqa: BLE001
        _say("could not prepare the hooks (%s: %s); the script runs unprofiled" % (type(e).__name__, e))
    _chain()
