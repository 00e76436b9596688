"""glibc's malloc under MXNet's CPU arrays, in experiments where CPU contexts stand in for devices.

MXNet 1.9.1 takes every CPU array straight from `malloc` (no pool: `MXNET_CPU_MEM_POOL_TYPE` is
not read on this build), and glibc gives freed memory back to the system, so the next arrays
fault their pages in again (a GPU's memory pool keeps what it freed). `keep_freed_memory()` makes
glibc keep it, with `mallopt`: one arena (the main heap, which only shrinks by trimming), no
`mmap` for large blocks, no trimming. The one thing to know: the process keeps its high-water
mark of memory, so experiments that measure memory (`bench memory`, `bench footprint`) must not
use it. Why and what it changed: docs/commands/bench.md ("The allocator"), docs/levers.md
("glibc and the stand-in experiments").
"""
import ctypes
import ctypes.util
import os
import sys

from .wire import MALLOC

# mallopt's parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
SETTINGS = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 2 ** 31 - 1))
# What a user sets to choose the allocator's behaviour; any of them leaves it to the user.
USER_VARIABLES = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                  "MALLOC_TOP_PAD_", "LD_PRELOAD")
# Set when gluonperf made the change, so that results say so (benchmark.environment records it).
MARK = MALLOC

NOTE = ("gluonperf kept glibc's malloc from giving freed memory back to the system (one arena, no mmap, "
        "no trim), as MXNet's GPU pool keeps device memory: MXNet's CPU arrays come straight from malloc, "
        "and faulting their pages in again made the pipelined overlap run 2-3x slower; set MALLOC_ARENA_MAX "
        "(or LD_PRELOAD another allocator) to keep your own")


def glibc_mallopt():
    """glibc's `mallopt` as a Python function, or None where the C library is not glibc."""
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # only glibc has it (musl does not)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt


def user_chose(environ):
    """The variables by which the user chose the allocator's behaviour themselves."""
    chosen = [v for v in USER_VARIABLES if environ.get(v, "").strip()]
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        chosen.append("GLIBC_TUNABLES")
    return chosen


def keep_freed_memory(environ=None, mallopt=None, modules=None):
    """Make glibc keep freed memory in the process (see the module's docstring), unless the
    user chose the allocator's behaviour (`user_chose`), the C library is not glibc, or
    MXNet is already loaded (its engine threads have arenas of their own by then).

    Call it before `import mxnet`. Returns the note to show, or None when nothing was set."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "mxnet" in modules or user_chose(environ):
        return None
    mallopt = glibc_mallopt() if mallopt is None else mallopt
    if mallopt is None:
        return None
    if not all(mallopt(param, value) == 1 for param, value in SETTINGS):
        return None
    environ[MARK] = "kept"
    return NOTE
