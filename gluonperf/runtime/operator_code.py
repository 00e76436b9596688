"""MXNet's operator functions compiled once per machine, not once per process.

An import hook gives mxnet/ndarray/register.py and mxnet/symbol/register.py an `exec` of their
own that keeps the compiled code of MXNet's ~2,300 operator functions, keyed by the source with
the handle replaced by a stand-in, in $XDG_CACHE_HOME/gluonperf (one file per bytecode version),
and puts this process's handle back before running it. GLUONPERF_OPERATOR_CACHE=0 turns it off;
anything unexpected falls back to MXNet's own compiling. The one thing to know: it is loaded by
its path (gluonperf/__init__.py, and the sitecustomize of a script under `profile --` or
`tune --`), so it imports only the standard library, and runtime/wire.py by its path too. How it
works: docs/install.md, "What gluonperf keeps on disk"; what it saves: docs/measurements.md.
"""
import builtins
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import re
import sys
import types

MODULES = ("mxnet.ndarray.register", "mxnet.symbol.register")  # the two modules whose `exec` is replaced


def _wire():
    """runtime/wire.py, loaded by its path as this file is (no package to import it from)."""
    spec = importlib.util.spec_from_file_location(
        "_gluonperf_wire", os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SWITCH = _wire().OPERATOR_CACHE
# the one number that differs between processes: the handle passed to the operator's call
_HANDLE = re.compile(r"(return _(?:imperative_invoke|symbol_creator)\()(\d+)(,)")
STAND_IN = 0x676C756F6E706572  # put in the handle's place in the cached code ("gluonper")


def path():
    """The cache file of this Python's bytecode version, or None when there is no home folder to hold it."""
    home = os.path.expanduser("~")
    root = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home != "~" else None)
    if not root or not os.path.isabs(root):  # XDG's rule: a relative path is ignored
        return None
    return os.path.join(root, "gluonperf", "mxnet-operators.%s-%s.marshal"
                        % (sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER.hex()))


class Cache:
    """The compiled code of the operators' sources: {sha1 of the source with the stand-in: code}."""

    def __init__(self, file):
        self.file = file
        self.codes = None   # read at the first operator
        self.used = {}      # what this process ran, written back when anything was compiled
        self.compiled = 0   # sources compiled here (none when the file had them all)

    def _read(self):
        try:
            with open(self.file, "rb") as f:
                codes = marshal.load(f)
            return codes if isinstance(codes, dict) else {}
        except (OSError, ValueError, EOFError, TypeError):  # missing, unreadable or damaged: compile
            return {}

    def code(self, source):
        """The code object `exec(source)` would run, or None when the source is not an operator's."""
        handles = []

        def stand_in(m):
            handles.append(int(m.group(2)))
            return m.group(1) + str(STAND_IN) + m.group(3)
        standard = _HANDLE.sub(stand_in, source)  # one pass: the handle found and replaced
        if len(handles) != 1 or str(STAND_IN) in source:
            return None
        handle = handles[0]
        key = hashlib.sha1(standard.encode("utf-8")).digest()
        if self.codes is None:
            self.codes = self._read()
        code = self.codes.get(key)
        if not isinstance(code, types.CodeType):
            code = compile(standard, "<string>", "exec")
            self.compiled += 1
        self.used[key] = code
        code, replaced = _put_back(code, handle)
        return code if replaced == 1 else None

    def write(self):
        """Write the code this process used, when it compiled any (nothing when the folder cannot be
        written: the next process compiles again)."""
        if not self.compiled:
            return
        import tempfile  # only here: most processes find every operator in the file
        folder = os.path.dirname(self.file)
        tmp = None
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".mxnet-operators-", dir=folder)
            with os.fdopen(fd, "wb") as f:
                marshal.dump(self.used, f)
            os.replace(tmp, self.file)
        except OSError:
            if tmp is not None and os.path.exists(tmp):
                os.remove(tmp)


def _put_back(code, handle):
    """`code` with `handle` in the stand-in's place, in it or the code objects it holds: (code, how
    many were replaced)."""
    consts, replaced = [], 0
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            c, n = _put_back(c, handle)
            replaced += n
        elif type(c) is int and c == STAND_IN:
            c, replaced = handle, replaced + 1
        consts.append(c)
    return (code.replace(co_consts=tuple(consts)) if replaced else code), replaced


def exec_through(cache):
    """An `exec` for MXNet's register modules: an operator's source runs from `cache`'s code."""

    def exec_(source, globals=None, locals=None):  # noqa: A002 (the builtin's own parameter names)
        if globals is None:  # as the builtin: the caller's namespaces
            frame = sys._getframe(1)
            globals = frame.f_globals
            if locals is None:
                locals = frame.f_locals
        code = cache.code(source) if isinstance(source, str) else None
        return builtins.exec(source if code is None else code, globals, locals)
    return exec_


class _Loader:
    """The usual loader of a module, with `exec` set in the register modules before they run and
    the cache written once `mxnet` itself has loaded. Everything else is the usual loader's."""

    def __init__(self, inner, name, cache):
        self._inner, self._name, self._cache = inner, name, cache

    def __getattr__(self, attribute):
        return getattr(self._inner, attribute)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        if self._name != "mxnet":
            module.__dict__["exec"] = exec_through(self._cache)
            return self._inner.exec_module(module)
        self._inner.exec_module(module)
        self._cache.write()  # only when mxnet loaded: a failed import writes nothing


class Finder:
    """A meta path finder for `mxnet` and its register modules, found as the path finder finds
    them, then loaded through `_Loader`."""

    gluonperf_operator_code = True

    def __init__(self, cache):
        self.cache = cache

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet" and name not in MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, name, self.cache)
        return spec


def install():
    """Put the finder in, once, unless MXNet is loaded already or the cache is turned off; the
    finder, or None. It goes just before the path finder, after any hook that waits for `mxnet`
    to be looked for (numpy_aliases'), which returns nothing and so must come first."""
    file = path()
    if "mxnet" in sys.modules or os.environ.get(SWITCH, "1") == "0" or file is None:
        return None
    for finder in sys.meta_path:
        if getattr(finder, "gluonperf_operator_code", False):  # once, however often this file is loaded
            return finder
    finder = Finder(Cache(file))
    at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
    sys.meta_path.insert(at, finder)
    return finder
