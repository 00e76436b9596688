"""gluonperf.runtime.precision: what --dtype bfloat16 sets before MXNet loads, and what it refuses.

`enable("bfloat16")` is only run in subprocesses (test_train): MXNet's AMP patches the
operators of the whole process and cannot be switched off again."""
import mxnet as mx
import pytest

from gluonperf import UserError
from gluonperf.runtime.precision import (AMX_ISA, AVX512_CORE, check, check_flag, dtype_in_argv, enable, has_bf16, hint,
                                  prepare, why_no_bf16)

AMX = {"avx2", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"} | AVX512_CORE
AVX512_BF16 = {"avx2", "avx512_bf16"} | AVX512_CORE
AVX2 = {"avx2", "fma"}  # an AMD EPYC Zen 3, say: oneDNN 2.4 has no bfloat16 kernels for it


def test_float32_changes_nothing():
    env = {}
    assert prepare("float32", env, flags=AMX, request=lambda: pytest.fail("asked for AMX")) is None
    assert env == {}


def test_amx_cpu_gets_the_permission_and_onednn_isa():
    env, asked = {}, []
    note = prepare("bfloat16", env, flags=AMX, request=lambda: asked.append(1) or True)
    assert asked == [1] and env == {"DNNL_MAX_CPU_ISA": AMX_ISA}
    assert "AMX" in note and "stay float32" in note


def test_a_user_set_isa_is_kept_and_read():
    env = {"DNNL_MAX_CPU_ISA": "AVX512_CORE_AMX"}
    note = prepare("bfloat16", env, flags=AMX, request=lambda: True)
    assert env == {"DNNL_MAX_CPU_ISA": "AVX512_CORE_AMX"} and "AMX allowed" in note and "as you set it" in note
    env = {"DNNL_MAX_CPU_ISA": "AVX512_CORE"}
    note = prepare("bfloat16", env, flags=AMX, request=lambda: True)
    assert env == {"DNNL_MAX_CPU_ISA": "AVX512_CORE"} and "keeps oneDNN off AMX" in note


def test_without_the_permission_amx_is_never_allowed():
    """With AMX in the ISA but no permission, the first AMX instruction kills the process (SIGILL)."""
    env = {}
    note = prepare("bfloat16", env, flags=AMX, request=lambda: False)
    assert env == {} and "refused" in note and "use float32" in note
    env = {"DNNL_MAX_CPU_ISA": "AVX512_CORE_AMX"}  # the user's own setting would crash: it goes, and we say so
    note = prepare("bfloat16", env, flags=AMX, request=lambda: False)
    assert env == {} and "unset your DNNL_MAX_CPU_ISA=AVX512_CORE_AMX" in note


def test_avx512_without_bfloat16_instructions_is_told_it_is_emulated():
    env = {}
    note = prepare("bfloat16", env, flags={"avx2"} | AVX512_CORE, request=lambda: pytest.fail("asked for AMX"))
    assert env == {} and "no bfloat16 instructions" in note and "emulates" in note
    assert check("bfloat16", [mx.cpu()], environ={}, flags={"avx2"} | AVX512_CORE) is None


def test_bfloat16_is_refused_below_avx512_where_onednn_has_no_kernels_for_it():
    """On an AVX2 CPU (an AMD EPYC Zen 3, 2026-11-23) oneDNN 2.4 failed to create any bfloat16
    convolution or dense layer: the command died in MXNet. Now it is refused before anything
    runs, and so is a DNNL_MAX_CPU_ISA that holds oneDNN below AVX-512."""
    assert why_no_bf16({}, AVX2) == "this CPU has no AVX-512 (AVX2 at most)"
    assert why_no_bf16({}, {"sse4_2"}) == "this CPU has no AVX-512 (nor AVX2)"
    assert why_no_bf16({"DNNL_MAX_CPU_ISA": "avx2"}, AMX) == "DNNL_MAX_CPU_ISA=AVX2 keeps oneDNN below AVX-512"
    for isa in ("AVX512_CORE", "AVX512_CORE_BF16", AMX_ISA, "ALL"):
        assert why_no_bf16({"DNNL_MAX_CPU_ISA": isa}, AMX) is None
    assert why_no_bf16({}, AVX512_BF16) is None
    with pytest.raises(ValueError, match=r"^dtype bfloat16 needs AVX-512 .*this CPU has no AVX-512 .*use float32$"):
        check("bfloat16", [mx.cpu()], environ={}, flags=AVX2)
    with pytest.raises(UserError, match=r"^--dtype bfloat16 needs AVX-512 .*DNNL_MAX_CPU_ISA=AVX2 keeps"):
        check_flag("bfloat16", [mx.cpu(0), mx.cpu(1)], environ={"DNNL_MAX_CPU_ISA": "AVX2"}, flags=AMX)
    assert check("float32", [mx.cpu()], environ={}, flags=AVX2) is None  # float32 runs anywhere
    env = {}  # and nothing is set, or said, before the refusal
    assert prepare("bfloat16", env, flags=AVX2, request=lambda: pytest.fail("asked for AMX")) is None and env == {}


def test_avx512_bf16_without_amx_is_left_to_a_measurement(monkeypatch):
    """Without AMX, oneDNN's AVX512-BF16 kernels were slower than float32 on some CPUs and
    faster on others (docs/levers.md): the note says both and how to measure, and
    a float32 run there gets the same pointer."""
    env = {}
    flags = AVX512_BF16
    note = prepare("bfloat16", env, flags=flags, request=lambda: pytest.fail("asked for AMX"))
    assert env == {} and "no AMX" in note and "use float32" not in note and "faster on others" in note and "--levers hybridize,dtype" in note
    float32_hint = hint("float32", [mx.cpu()], flags=flags)
    assert "AVX512-BF16" in float32_hint and "--levers hybridize,dtype" in float32_hint
    assert has_bf16(flags) and has_bf16(AMX) and not has_bf16(AVX2)
    assert hint("float32", [mx.cpu()], flags=AVX2) is None
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")  # the hint must not send a run to a refusal
    assert hint("float32", [mx.cpu()], flags=flags) is None


def test_dtype_in_argv():
    assert dtype_in_argv(["--epochs", "1"]) == "float32"
    assert dtype_in_argv(["--dtype", "bfloat16"]) == "bfloat16"
    assert dtype_in_argv(["--dtype=bfloat16", "--ctx", "cpu"]) == "bfloat16"
    # as argparse: the last one counts, abbreviations too
    assert dtype_in_argv(["--dtype", "bfloat16", "--dtype", "float32"]) == "float32"
    assert dtype_in_argv(["--dtyp", "bfloat16"]) == dtype_in_argv(["--dt=bfloat16"]) == "bfloat16"
    assert dtype_in_argv(["--d", "bfloat16", "--data-dir", "x"]) == "float32"  # not --dtype's


def test_enable_rejects_what_mxnet_cannot_run():
    with pytest.raises(ValueError, match="one of float32, bfloat16"):
        enable("float16", [mx.cpu()])
    with pytest.raises(ValueError, match="CPU contexts only.*gpu"):
        enable("bfloat16", [mx.cpu(0), mx.gpu(0)])
    assert enable("float32", [mx.cpu()]) is None  # nothing to switch on


def test_the_commands_refuse_a_dtype_as_one_line_naming_the_flag():
    # train, profile and bench footprint all refuse through check_flag
    with pytest.raises(UserError, match=r"^--dtype bfloat16 runs on CPU contexts only.*gpu\(0\)"):
        check_flag("bfloat16", [mx.cpu(0), mx.gpu(0)])
    with pytest.raises(UserError, match=r"^--dtype 'float16': use one of float32, bfloat16$"):
        check_flag("float16", [mx.cpu()])
    assert check_flag("bfloat16", [mx.cpu(0), mx.cpu(1)], environ={}, flags=AMX) is None


def test_float32_runs_on_an_amx_cpu_hear_of_bfloat16():
    assert "--dtype bfloat16" in hint("float32", [mx.cpu(0), mx.cpu(1)], flags=AMX)
    assert hint("bfloat16", [mx.cpu()], flags=AMX) is None  # already on
    assert hint("float32", [mx.gpu(0)], flags=AMX) is None  # CPU only


def test_a_process_that_inherits_the_amx_isa_asks_for_amx_itself():
    """A library caller or a child that inherits DNNL_MAX_CPU_ISA=AVX512_CORE_AMX, and runs
    bfloat16 without going through a command's `prepare`, must not die of SIGILL."""
    import os
    import subprocess
    import sys
    from gluonperf.runtime.precision import has_amx
    if not has_amx():
        pytest.skip("this CPU has no AMX: nothing to crash on")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import mxnet as mx; from gluonperf.measure.ceiling import measure_ceiling; "
            "r = measure_ceiling(mx.cpu(0), 'quick', repeat=1, dtype='bfloat16'); print(len(r))")
    env = dict(os.environ, PYTHONPATH=root, DNNL_MAX_CPU_ISA="AVX512_CORE_AMX", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=120)
    from gluonperf.measure.ceiling import CONVOLUTIONS
    # every bfloat16 kernel ran: the convolutions and FullyConnected (nd.dot has no bfloat16 kernel)
    assert p.returncode == 0 and p.stdout.split() == [str(len(CONVOLUTIONS) + 1)], (p.returncode, p.stderr[-500:])
