"""What MXNet 1.9.1 imports at start-up that gluonperf never uses, kept out of it; what it uses
later, loaded at its first use; the standard library's distutils for MXNet.

Those imports were more than half of every command's start (`python -X importtime -c "import
gluonperf, mxnet"`; the figures are in docs/libraries.md). The one thing to know: it acts only
in processes that import gluonperf before MXNet (gluonperf/__init__.py installs it); a user's
script under `profile --` or `tune --` imports MXNet as it would alone. Loaded by its path, it
needs only the standard library.
"""
import importlib.machinery
import sys
import types

# What MXNet 1.9.1 imports when it loads that gluonperf never uses: (importing module, module, the
# name it gives it, or None where it cannot be put back). mxnet.model imports scikit-learn (with
# SciPy's statistics and pandas) only so that its legacy FeedForward can subclass BaseEstimator;
# mxnet.contrib.quantization imports scipy.stats only for int8 calibration by KL divergence,
# mxnet.test_utils only for its random-distribution checks; mxnet.ndarray imports scipy.sparse only
# to convert SciPy's sparse matrices. All fall back when the import fails (`object`, None; a clear
# error if someone does calibrate, run those checks or convert). Imported later by anyone else (a
# script converting a SciPy matrix must import it; tune's statistics import scipy.stats), a module
# is put back under its name. An import counts as theirs wherever it is beneath them: OpenCV's
# module, which mxnet.image imports and never uses, stays, since mxnet.recordio, beneath it, packs
# images with it.
_KEPT_OUT_OF_MXNET = (("mxnet.model", "sklearn", None), ("mxnet.contrib.quantization", "scipy.stats", "stats"),
                      ("mxnet.test_utils", "scipy.stats", "ss"), ("mxnet.ndarray.sparse", "scipy.sparse", "spsp"),
                      ("mxnet.ndarray.utils", "scipy.sparse", "spsp"))
_PUT_BACK = {module for _, module, attr in _KEPT_OUT_OF_MXNET if attr}
# What MXNet imports at start-up for one use that comes later, if at all: requests for a download,
# onnx for an export. Imported from these modules, each is loaded on its first use
# (`_OnFirstUse`): the same module then, and none of its cost where it is not used.
_LOADED_ON_FIRST_USE = {"requests": ("mxnet.test_utils", "mxnet.gluon.utils"),
                        "onnx": ("mxnet.onnx.mx2onnx._op_translations._op_translations_opset12",
                                 "mxnet.onnx.mx2onnx._op_translations._op_translations_opset13")}
# MXNet 1.9.1 imports distutils at start-up for LooseVersion and StrictVersion alone. In a venv,
# setuptools' distutils shim answers that import by loading setuptools itself (with
# pkg_resources): 0.25 s of a 1.8 s `import mxnet` on the 2-core Zen 3 (docs/libraries.md). Where
# the standard library still has distutils (Python up to 3.11), MXNet gets that one: the same
# two classes.
_STDLIB_DISTUTILS_FOR = ("mxnet.numpy_op_fallback", "mxnet.numpy_dispatch_protocol")


def _imported_by(importers):
    """The first of `importers` on the stack of the import under way, or None."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") in importers:
            return frame.f_globals["__name__"]
        frame = frame.f_back
    return None


class _Wrapping:
    """A loader around a module's own loader."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)


class _OnFirstUse(_Wrapping):
    """A loader that runs a module's code at the first use of one of its attributes. Unlike
    importlib.util.LazyLoader, the import system's own look at `__spec__` (at every later
    `import` of the module, on Python up to 3.12) is not a use."""

    def exec_module(self, module):
        module.__class__ = _NotYetRun


class _ThenPutBack(_Wrapping):
    """A loader that runs a module's code, then puts it back where MXNet fell back without it."""

    def exec_module(self, module):
        self.loader.exec_module(module)
        for owner, name, attr in _KEPT_OUT_OF_MXNET:
            if name == module.__name__ and attr and getattr(sys.modules.get(owner), attr, False) is None:
                setattr(sys.modules[owner], attr, module)


class _NotYetRun(types.ModuleType):
    def __getattribute__(self, attr):
        if attr == "__spec__":
            return types.ModuleType.__getattribute__(self, attr)
        self.__class__ = types.ModuleType
        spec = self.__spec__
        spec.loader = self.__loader__ = spec.loader.loader
        spec.loader.exec_module(self)
        return getattr(self, attr)


class KeepOutOfMXNet:
    """The import hook: it makes the imports of `_KEPT_OUT_OF_MXNET` fail, from those modules only,
    as if the package were not installed (any other import of them loads them and puts them back),
    loads `_LOADED_ON_FIRST_USE` on first use, and gives MXNet the standard library's distutils."""

    def find_spec(self, name, path=None, target=None):
        blocked = {importer for importer, module, _ in _KEPT_OUT_OF_MXNET  # a module, its parents, its children
                   if name == module or name.startswith(module + ".") or module.startswith(name + ".")}
        importer = _imported_by(blocked) if blocked else None
        if importer:
            raise ImportError("gluonperf keeps %s out of %s (see gluonperf/runtime/mxnet_imports.py)" % (name, importer))
        if name in _LOADED_ON_FIRST_USE and _imported_by(_LOADED_ON_FIRST_USE[name]):
            return _wrapped_spec(name, path, _OnFirstUse)
        if name in _PUT_BACK:
            return _wrapped_spec(name, path, _ThenPutBack)
        if name == "distutils" and sys.version_info < (3, 12) and _imported_by(_STDLIB_DISTUTILS_FOR):
            import os
            return importlib.machinery.PathFinder.find_spec(name, [os.path.dirname(os.__file__)])
        return None


def _wrapped_spec(name, path, wrapping):
    """The spec the path finders give `name`, its loader inside `wrapping`."""
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is not None and hasattr(spec.loader, "exec_module"):
        spec.loader = wrapping(spec.loader)
    return spec


def install():
    """Put the hook first on sys.meta_path, unless MXNet is loaded already."""
    if "mxnet" not in sys.modules and not any(type(f).__name__ == "KeepOutOfMXNet" for f in sys.meta_path):
        sys.meta_path.insert(0, KeepOutOfMXNet())
