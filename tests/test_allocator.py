"""gluonperf.runtime.allocator: glibc keeps freed memory for the experiments whose CPU contexts stand
in for devices (bench overlap, parallel, allreduce), and only there."""
import json
import platform
import sys

import pytest

from helpers import run_module
from gluonperf.runtime import allocator
from gluonperf.cli import common as cli


class Mallopt:
    def __init__(self, answer=1):
        self.calls, self.answer = [], answer

    def __call__(self, param, value):
        self.calls.append((param, value))
        return self.answer


def test_keeps_freed_memory_and_marks_the_environment():
    mallopt, environ = Mallopt(), {}
    note = allocator.keep_freed_memory(environ, mallopt, modules={})
    assert note == allocator.NOTE
    assert mallopt.calls == [(-8, 1), (-4, 0), (-1, 2 ** 31 - 1)]  # one arena, no mmap, no trim
    assert environ == {"GLUONPERF_MALLOC": "kept"}


@pytest.mark.parametrize("environ", [{"MALLOC_ARENA_MAX": "8"}, {"MALLOC_TRIM_THRESHOLD_": "0"},
                                     {"LD_PRELOAD": "libtcmalloc_minimal.so.4"},
                                     {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}])
def test_an_allocator_the_user_chose_is_left_alone(environ):
    mallopt, before = Mallopt(), dict(environ)
    assert allocator.keep_freed_memory(environ, mallopt, modules={}) is None
    assert mallopt.calls == [] and environ == before


def test_other_tunables_and_empty_variables_do_not_count_as_a_choice():
    assert allocator.user_chose({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2", "LD_PRELOAD": " "}) == []


def test_too_late_or_refused_changes_nothing_it_reports():
    mallopt, environ = Mallopt(), {}
    assert allocator.keep_freed_memory(environ, mallopt, modules={"mxnet": object()}) is None
    assert mallopt.calls == [] and environ == {}
    assert allocator.keep_freed_memory(environ, Mallopt(answer=0), modules={}) is None
    assert environ == {}


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_mallopt_is_found_and_accepts_a_harmless_setting():
    mallopt = allocator.glibc_mallopt()
    assert mallopt is not None
    assert mallopt(allocator.M_MMAP_MAX, 65536) == 1  # glibc's own default


def test_only_stand_in_experiments_on_cpu_contexts(monkeypatch):
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: "kept")
    commands = ("parallel", "overlap", "allreduce")
    assert cli.allocator_defaults(["overlap", "--repeat", "3"], commands) == "kept"
    assert cli.allocator_defaults(["allreduce", "--ctx=cpu0,cpu1"], commands) == "kept"
    assert cli.allocator_defaults(["memory"], commands) is None  # measures the process's memory
    assert cli.allocator_defaults(["overlap", "--ctx", "gpu0"], commands) is None
    assert cli.allocator_defaults(["overlap", "--help"], commands) is None


def _overlap(tmp_path, name, **env):
    out = tmp_path / (name + ".json")
    p = run_module("gluonperf.bench", "overlap", "--repeat", "8", "--json", str(out), env=env, timeout=180)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in open(out)]
    return p.stderr, rows[-1]


@pytest.mark.alone
def test_bench_overlap_keeps_freed_memory_unless_the_user_chose_the_allocator(tmp_path):
    """As users run it: by default the pipelined run faults no memory in again; with glibc's
    own behaviour (the user set MALLOC_ARENA_MAX) it does, and the command says so."""
    kept_err, kept = _overlap(tmp_path, "kept")
    glibc_err, glibc = _overlap(tmp_path, "glibc", MALLOC_ARENA_MAX="8")
    assert "kept glibc's malloc" in kept_err and kept["env"]["env"].get("GLUONPERF_MALLOC") == "kept"
    assert "kept glibc's malloc" not in glibc_err and "GLUONPERF_MALLOC" not in glibc["env"]["env"]
    assert kept["name"] == glibc["name"] == "compute and copy"
    assert glibc["extra_faults"] > 256, glibc  # 1 MiB faulted in again per repeat, or more
    assert kept["extra_faults"] < 0.25 * glibc["extra_faults"], (kept, glibc)
    assert "more page faults per repeat" in glibc_err and "more page faults" not in kept_err
