"""MXNet's operator functions compiled once per machine (gluonperf/runtime/operator_code.py): the
functions are the ones MXNet makes, a second process compiles none of them, and a cache that
cannot be read or written changes nothing but the time. Each case is a fresh process (the
cache acts as MXNet loads), with a cache folder of its own (XDG_CACHE_HOME)."""
import json
import marshal
import os
import stat
import subprocess
import sys

import pytest

from helpers import ROOT, clean_env

# Every operator function MXNet made, as far as a process can tell them apart: name, module, doc,
# bytecode and constants, with the operator's handle (an address, other in every process) as "H";
# strays: the handles that are none of this process's operators
DESCRIBE = r"""
import hashlib, json, sys, types
import gluonperf, mxnet as mx

import ctypes
names, size = ctypes.POINTER(ctypes.c_char_p)(), mx.base.mx_uint()
mx.base.check_call(mx.base._LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(names)))
handles = set()
for i in range(size.value):
    handle = mx.base.OpHandle()
    mx.base.check_call(mx.base._LIB.NNGetOpHandle(names[i], ctypes.byref(handle)))
    handles.add(handle.value)
strays = []

def consts(code):
    out = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.append(consts(c))
        elif type(c) is int and c > 2 ** 32:  # an operator's handle: one of MXNet's, other in every process
            out.append("H")
            if c not in handles:
                strays.append(c)
        else:
            out.append(repr(c))
    return out

functions = {}
for space in [m for n, m in sorted(sys.modules.items()) if n.startswith("mxnet.") and m is not None]:
    for name, f in sorted(vars(space).items()):
        code = getattr(f, "__code__", None)
        if code is not None and code.co_filename == "<string>":
            functions[space.__name__ + "." + name] = hashlib.sha1(repr((
                f.__name__, f.__module__, f.__doc__, code.co_code, code.co_names, code.co_varnames,
                code.co_firstlineno, consts(code))).encode()).hexdigest()
finder = [f for f in sys.meta_path if getattr(f, "gluonperf_operator_code", False)]
x = mx.nd.array([-1.0, 2.0])
print(json.dumps({"functions": functions, "strays": strays, "compiled": finder[0].cache.compiled if finder else None,
                  "relu": mx.nd.relu(x).asnumpy().tolist(), "np": float(mx.np.ones((3,)).sum()),
                  "sym": mx.sym.relu(mx.sym.var("a")).infer_shape(a=(2, 3))[1]}))
"""


def describe(cache_home, **env):
    p = subprocess.run([sys.executable, "-c", DESCRIBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=clean_env(XDG_CACHE_HOME=str(cache_home), **env))
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", p.stderr
    return json.loads(p.stdout)


def cache_files(cache_home):
    folder = cache_home / "gluonperf"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache folder of its own, written by a first process: (home, what a process with the cache
    turned off made, what the first one made)."""
    home = tmp_path_factory.mktemp("warm") / "cache"
    usual = describe(home, GLUONPERF_OPERATOR_CACHE="0")
    assert usual["compiled"] is None and cache_files(home) == []  # turned off: no finder, no file
    return home, usual, describe(home)


def test_a_second_process_compiles_nothing_and_gets_the_functions_mxnet_makes(warm):
    home, usual, first = warm
    files = cache_files(home)
    assert len(files) == 1 and files[0].startswith("mxnet-operators.") and files[0].endswith(".marshal"), files
    assert stat.S_IMODE(os.stat(home / "gluonperf").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(home / "gluonperf" / files[0]).st_mode) == 0o600
    second = describe(home)
    assert first["compiled"] > 1000 and second["compiled"] == 0
    assert cache_files(home) == files  # nothing written again, no temporary file left
    assert len(usual["functions"]) > 2000
    for run in (usual, first, second):
        assert run["strays"] == []  # every handle in the code is one of this process's operators
        assert run["functions"] == usual["functions"]
        assert (run["relu"], run["np"], run["sym"]) == ([0.0, 2.0], 3.0, [[2, 3]])


@pytest.mark.parametrize("damage", ["garbage", "truncated", "not a folder"])
def test_a_cache_that_cannot_be_read_or_written_changes_nothing_but_the_time(warm, tmp_path, damage):
    home = tmp_path / "cache"
    home.mkdir()
    if damage == "not a folder":  # gluonperf's folder cannot be made: compiled, nothing written, no error
        (home / "gluonperf").write_text("a file where the folder would be\n")
        run = describe(home)
        assert run["compiled"] > 1000 and (home / "gluonperf").read_text().startswith("a file")
        return
    (name,) = cache_files(warm[0])
    data = (warm[0] / "gluonperf" / name).read_bytes()
    (home / "gluonperf").mkdir(mode=0o700)
    path = home / "gluonperf" / name
    path.write_bytes(b"\x00garbage" * 10 if damage == "garbage" else data[:len(data) // 2])
    again = describe(home)
    assert again["compiled"] > 1000 and (again["relu"], again["np"]) == ([0.0, 2.0], 3.0)
    assert marshal.loads(path.read_bytes()).keys() == marshal.loads(data).keys()  # written anew, whole
    assert cache_files(home) == [name]


def test_the_cache_finder_comes_after_the_hooks_that_wait_for_mxnet():
    """numpy_aliases' hook answers nothing and must see `mxnet` looked for: a finder before it that
    finds `mxnet` would hide it. The cache's goes just before the path finder."""
    p = subprocess.run([sys.executable, "-c", "import sys, importlib.machinery, gluonperf\n"
                        "print([getattr(f, '__name__', type(f).__name__) for f in sys.meta_path])"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, env=clean_env())
    names = eval(p.stdout)  # noqa: S307 (a list of class names printed above)
    assert names.index("_BeforeMXNet") < names.index("Finder") == names.index("PathFinder") - 1, names
