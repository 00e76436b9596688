"""Training in bfloat16 on CPUs: MXNet's automatic mixed precision (AMP), and what the
CPU needs for it to pay.

`prepare(dtype)` does the environment part and must run before MXNet is loaded: on a CPU with
AMX it asks Linux for the tile registers (`request_amx`; without that permission the first AMX
instruction kills the process) and tells oneDNN 2.4 to use them (DNNL_MAX_CPU_ISA).
`enable(dtype, contexts)` switches AMP on and must run before the model is built: convolutions
and dense layers in bfloat16, the rest float32. `check` refuses bfloat16 below AVX-512, where
oneDNN 2.4 has no bfloat16 kernels. What `--dtype bfloat16` does: docs/commands/train.md,
"Precision"; where it pays: docs/levers.md, "bfloat16 mixed precision".
"""
import ctypes
import os

DTYPES = ("float32", "bfloat16")
# AVX512-BF16 without AMX: measured slower than float32 on some CPUs and much faster on others
# (docs/levers.md, "bfloat16 mixed precision" has the figures and machines), and what to do
WITHOUT_AMX = ("slower than float32 on some CPUs and much faster on others; measure it here "
               "(python -m gluonperf.tune --levers hybridize,dtype) and check that your model learns as well")
AMX_ISA = "AVX512_CORE_AMX"
# oneDNN 2.4's bfloat16 kernels need avx512_core (AVX-512 F, BW, VL and DQ): natively on AVX512-BF16
# and AMX, emulated on the rest; DNNL_MAX_CPU_ISA set to one of these ISAs keeps it below that
AVX512_CORE = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})
ISAS_BELOW_AVX512_CORE = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_MIC", "AVX512_MIC_4OPS")
_ARCH_REQ_XCOMP_PERM = 0x1023   # linux/arch/x86/include/uapi/asm/prctl.h
_XFEATURE_XTILEDATA = 18
_SYS_ARCH_PRCTL = 158           # x86-64


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (an empty set where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_vnni():
    """Whether the CPU has 8-bit dot-product instructions (AVX512-VNNI, AVX-VNNI or AMX-INT8),
    without which INT8 kernels multiply through VPMADDUBSW, whose 16-bit sums can saturate."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & cpu_flags())


def request_amx():
    """Ask Linux for this process's permission to use the AMX tile registers; True if given."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def dtype_in_argv(argv):
    """The value of a command line's --dtype (read before argparse and MXNet), or float32;
    as argparse reads it: the last one counts, and so do abbreviations (--dt, --dtyp)."""
    value = "float32"
    for i, arg in enumerate(argv):
        flag, eq, inline = arg.partition("=")
        if len(flag) < 4 or not "--dtype".startswith(flag):
            continue
        if eq:
            value = inline
        elif i + 1 < len(argv):
            value = argv[i + 1]
    return value


def prepare(dtype, environ=None, flags=None, request=request_amx):
    """Before MXNet loads: for bfloat16 on a CPU with AMX, get the AMX permission and set
    DNNL_MAX_CPU_ISA (unless the user set it). Returns a one-line note for the user (what
    was set, or why bfloat16 will be slow here), or None for float32."""
    environ = os.environ if environ is None else environ
    if dtype != "bfloat16":
        return None
    flags = cpu_flags() if flags is None else flags
    if has_amx(flags):
        isa = environ.get("DNNL_MAX_CPU_ISA")
        if not request():
            unset = ""
            if isa and "AMX" in isa.upper():  # oneDNN would use AMX unallowed: the process would die (SIGILL)
                del environ["DNNL_MAX_CPU_ISA"]
                unset = "; gluonperf unset your DNNL_MAX_CPU_ISA=%s, since AMX without permission kills the process" % isa
            return ("--dtype bfloat16: Linux refused this process the AMX registers (kernel older than 5.16?), "
                    "so oneDNN runs bfloat16 on AVX512-BF16, which is slower than float32; use float32%s" % unset)
        if isa and "AMX" not in isa.upper():
            return ("--dtype bfloat16: DNNL_MAX_CPU_ISA=%s as you set it keeps oneDNN off AMX, so bfloat16 runs "
                    "on AVX512-BF16, slower than float32; unset it or set %s" % (isa, AMX_ISA))
        if isa:
            return "--dtype bfloat16: AMX allowed; DNNL_MAX_CPU_ISA=%s as you set it" % isa
        environ["DNNL_MAX_CPU_ISA"] = AMX_ISA
        return ("--dtype bfloat16: convolutions and dense layers run in bfloat16 on the CPU's AMX units "
                "(gluonperf set DNNL_MAX_CPU_ISA=%s, as oneDNN 2.4 leaves AMX off); weights, BatchNorm and "
                "the optimizer stay float32" % AMX_ISA)
    if why_no_bf16(environ, flags):
        return None  # `check` refuses it, in one line, once the flags are parsed
    if "avx512_bf16" in flags:
        return "--dtype bfloat16: this CPU has no AMX, so oneDNN runs bfloat16 on AVX512-BF16, which is " + WITHOUT_AMX
    return ("--dtype bfloat16: this CPU has no bfloat16 instructions (no AMX, no AVX512-BF16): oneDNN "
            "emulates them on AVX-512, which gluonperf has not measured; expect it slower than float32")


def why_no_bf16(environ=None, flags=None):
    """Why oneDNN 2.4 cannot run bfloat16 in this process (one phrase), or None where it can:
    a CPU without AVX-512, or DNNL_MAX_CPU_ISA set below it."""
    environ = os.environ if environ is None else environ
    flags = cpu_flags() if flags is None else flags
    if not AVX512_CORE <= flags:
        return "this CPU has no AVX-512 (%s)" % ("AVX2 at most" if "avx2" in flags else "nor AVX2")
    isa = environ.get("DNNL_MAX_CPU_ISA", "").strip().upper()
    if isa in ISAS_BELOW_AVX512_CORE:
        return "DNNL_MAX_CPU_ISA=%s keeps oneDNN below AVX-512" % isa
    return None


def has_bf16(flags=None):
    """True when the CPU has bfloat16 instructions oneDNN 2.4 uses (AMX or AVX512-BF16):
    where --dtype bfloat16 can pay, and so where it is worth measuring."""
    flags = cpu_flags() if flags is None else flags
    return has_amx(flags) or "avx512_bf16" in flags


def has_amx(flags=None):
    """True when the CPU has AMX with bfloat16 (Intel Xeons since the generation that introduced AMX)."""
    return {"amx_bf16", "amx_tile"} <= (cpu_flags() if flags is None else flags)


def hint(dtype, contexts, flags=None):
    """A one-line note for a float32 run on CPU contexts of a CPU with AMX, where
    --dtype bfloat16 can train much faster, or with AVX512-BF16, where it may
    (docs/levers.md); else None."""
    flags = cpu_flags() if flags is None else flags
    if dtype != "float32" or not contexts or not has_bf16(flags) or why_no_bf16(flags=flags):
        return None
    if any(c.device_type != "cpu" for c in contexts):
        return None
    if has_amx(flags):
        return ("this CPU has AMX: --dtype bfloat16 (mixed precision; float32 weights) can train much faster "
                "here; check that it learns as well for your model")
    return "this CPU has AVX512-BF16: --dtype bfloat16 (mixed precision; float32 weights) is " + WITHOUT_AMX


def precision_label(dtype):
    """What a title adds for `dtype`: ', bfloat16 mixed precision', or nothing for float32."""
    return "" if dtype == "float32" else ", %s mixed precision" % dtype


def check(dtype, contexts, environ=None, flags=None):
    """ValueError for an unknown dtype, bfloat16 on a non-CPU context (MXNet 1.9's
    bfloat16 kernels are oneDNN's, CPU only), or bfloat16 where oneDNN has no kernels
    for it (`why_no_bf16`)."""
    if dtype not in DTYPES:
        raise ValueError("dtype %r: use one of %s" % (dtype, ", ".join(DTYPES)))
    if dtype != "bfloat16":
        return
    others = [str(c) for c in contexts if c.device_type != "cpu"]
    if others:
        raise ValueError("dtype bfloat16 runs on CPU contexts only (MXNet's bfloat16 kernels are oneDNN's); "
                         "%s is not one: use float32 there" % ", ".join(others))
    why = why_no_bf16(environ, flags)
    if why:
        raise ValueError("dtype bfloat16 needs AVX-512 (MXNet 1.9.1's oneDNN has no bfloat16 kernels below it), "
                         "and %s: use float32" % why)


def check_flag(dtype, contexts, environ=None, flags=None):
    """`check` for a command's --dtype flag: the same refusal as a one-line UserError."""
    from .. import UserError
    try:
        check(dtype, contexts, environ, flags)
    except ValueError as e:
        raise UserError("--%s" % e)


def enable(dtype, contexts):
    """Switch MXNet's AMP to `dtype` for every model built after this call (a no-op for
    float32); ValueError as `check` says."""
    check(dtype, contexts)
    if dtype == "bfloat16" and has_amx():
        request_amx()  # per process, repeatable: oneDNN may be allowed AMX by the environment it inherited
    from mxnet.contrib.amp import amp
    if dtype == "float32":
        if getattr(amp, "_amp_initialized", False):
            raise ValueError("dtype float32: bfloat16 AMP was switched on earlier in this process and MXNet "
                             "cannot switch it off; run float32 in a fresh process")
        return
    amp.init(target_dtype="bfloat16")  # once per process; later calls do nothing
