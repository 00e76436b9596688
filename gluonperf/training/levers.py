"""The levers of gluonperf's own training runs (`tune --model`), and the environment levers
every runner can try (a user's script's too: gluonperf/script/levers.py takes them from here).

A lever is a function of the best candidate so far that returns the candidates to try against
it, the best itself first, each built with the candidate's own `with_env` / `with_flags` (so
that nothing here needs tuning/'s Candidate). Every candidate runs in a fresh process, because
MXNet reads these environment variables once, at start-up. To add a lever to `tune --model`:
write its function here, add it to `model_levers` (in the order tune tries them) and its name
to LEVER_NAMES, and to LEVER_NEEDS what it needs when it can be empty; a runner says which of
them apply to it (`runners.TrainRunner.levers`).
"""
from ..runtime.precision import has_bf16, why_no_bf16
from ..runtime.threads import TEMP_COPY_FOR_CONTEXTS, physical_cores

# malloc replacements tried through LD_PRELOAD, each by its library names in order of
# preference (e.g. Debian's libjemalloc2, libtcmalloc-minimal4)
ALLOCATORS = (("jemalloc",), ("tcmalloc_minimal", "tcmalloc"))


def allocators():
    """The malloc replacements installed here, as LD_PRELOAD names: the first name found of each."""
    import ctypes.util
    found = (next((lib for lib in map(ctypes.util.find_library, names) if lib), None) for names in ALLOCATORS)
    return [lib for lib in found if lib]


THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
HUGE_PAGES = "glibc.malloc.hugetlb=1"  # GLIBC_TUNABLES: malloc asks for transparent huge pages


def huge_pages_tunable():
    """HUGE_PAGES when it can change something here: glibc 2.35 or later (the tunable's
    first release) and Linux transparent huge pages in "madvise" mode (with "always"
    malloc's large blocks get huge pages anyway, with "never" not at all); else None."""
    import platform
    libc, version = platform.libc_ver()
    try:
        with open(THP_MODE) as f:
            mode = f.read()
        new_enough = libc == "glibc" and tuple(int(v) for v in version.split(".")[:2]) >= (2, 35)
    except (OSError, ValueError):
        return None
    return HUGE_PAGES if new_enough and "[madvise]" in mode else None


# --- the environment levers (any runner) --------------------------------------------------

def engine(b):
    return [b, b.with_env("MXNET_ENGINE_TYPE=ThreadedEngine", MXNET_ENGINE_TYPE="ThreadedEngine")]


def onednn(b):
    return [b, b.with_env("MXNET_MKLDNN_ENABLED=0", MXNET_MKLDNN_ENABLED=0)]


def allocator(b):  # looked up only when this lever runs
    huge = huge_pages_tunable()
    return ([b] + [b.with_env("LD_PRELOAD=%s" % lib, LD_PRELOAD=lib) for lib in allocators()]
            + ([b.with_env("GLIBC_TUNABLES=" + huge, GLIBC_TUNABLES=huge)] if huge else []))


def bulk(b):
    return [b, b.with_env("MXNET_EXEC_BULK_EXEC_TRAIN=0", MXNET_EXEC_BULK_EXEC_TRAIN=0),
            b.with_env("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=1000", MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=1000)]


def openmp(b):
    # (not GOMP_SPINCOUNT=infinite: its idle threads spin for ever, taking a core from
    # everything else, including the other candidates of a paired sweep)
    return [b, b.with_env("OMP_PROC_BIND=true OMP_PLACES=cores", OMP_PROC_BIND="true", OMP_PLACES="cores")]


# --- gluonperf's own training runs --------------------------------------------------------

def threads(cores):
    """All the cores (OMP_NUM_THREADS; MXNet's default on x86 is half the processors, assuming
    hyper-threading) and one."""
    return lambda b: [b, b.with_env("OMP_NUM_THREADS=%d" % cores, OMP_NUM_THREADS=cores),
                      b.with_env("OMP_NUM_THREADS=1", OMP_NUM_THREADS=1)] if cores > 1 else [b]


def hybridize(b):
    return [b] + [b.with_flags("hybridize=%s" % m, hybridize=m) for m in ("hybrid", "static")
                  if b.flag("hybridize") != m]


def data(cores, rec):
    """DataLoader worker processes; for a .rec (tune --dataset), MXNet's ImageRecordIter, its threads
    set by --workers."""
    return lambda b: [b] + [b.with_flags("workers=%d" % w, workers=w) for w in sorted({0, 1, cores})
                            if b.flag("workers") != str(w)] + (
        [b.with_flags("loader=recorditer workers=%d" % w, loader="recorditer", workers=w) for w in sorted({1, cores})]
        if rec and b.flag("loader") != "recorditer" else [])


def optimizer(b):
    """Implementations of one optimizer that give the same weights (gluonperf.training.optimizers,
    tested there): SGD and AdamW update each parameter with its own operator unless this is set,
    and with MXNet's multi-tensor operator in groups of 4 (MXNet's default) when it is. MXNet
    1.9.1 has one implementation of the others (bench optimizers), so for them there is nothing
    to try."""
    from ..config import GROUPED_UPDATES
    if (b.flag("optimizer") or "sgd") not in GROUPED_UPDATES:
        return [b]
    return [b, b.with_env("MXNET_OPTIMIZER_AGGREGATION_SIZE=4", MXNET_OPTIMIZER_AGGREGATION_SIZE=4)]


def split(contexts, kvstores, cores):
    """One context against all of them, with each kvstore, the threads shared among them."""
    n, all_ctx = len(contexts), ",".join(contexts)

    def make(b):
        out = [b]
        if b.flag("ctx") != contexts[0]:
            out.append(b.with_flags("ctx=%s" % contexts[0], ctx=contexts[0]))
        threads = max(1, cores // n)
        label = many = None
        for kv in kvstores:
            if kv != b.flag("kvstore") or b.flag("ctx") != all_ctx:
                label = "ctx=%s kvstore=%s OMP_NUM_THREADS=%d" % (all_ctx, kv, threads)
                many = b.with_flags("", ctx=all_ctx, kvstore=kv).with_env("", OMP_NUM_THREADS=threads)
                out.append(many.with_env("%s MXNET_CPU_TEMP_COPY=%d" % (label, TEMP_COPY_FOR_CONTEXTS),
                                         MXNET_CPU_TEMP_COPY=TEMP_COPY_FOR_CONTEXTS))
        if many is not None and any(c.startswith("cpu") for c in contexts):
            # MXNet's own workspace pool, shared by all CPU contexts (it serialised them:
            # docs/levers.md), against the larger one gluonperf sets
            out.append(many.with_env("%s MXNET_CPU_TEMP_COPY=1 (MXNet's default)" % label, MXNET_CPU_TEMP_COPY=1))
        return out
    return make


def dtype(b):
    return [b, b.with_flags("dtype=bfloat16", dtype="bfloat16")]


def model_levers(contexts, kvstores, cores=None, data_lever=False, rec=False, dtype_lever=False):
    """The lever stages of a model runner, in the order tune tries them: (lever name, function best
    candidate -> [candidates]). `data_lever`, `dtype_lever`: the runner trains on data and can train in
    bfloat16 (the dtype lever only where it can pay: AMX or AVX512-BF16, CPU contexts)."""
    cores = cores or physical_cores()
    stages = [("threads", threads(cores)), ("hybridize", hybridize)]
    if data_lever:
        stages.append(("data", data(cores, rec)))
    stages += [("engine", engine), ("onednn", onednn), ("allocator", allocator), ("bulk", bulk),
               ("optimizer", optimizer), ("openmp", openmp)]
    if len(contexts) > 1:
        stages.append(("contexts", split(list(contexts), kvstores, cores)))
    if dtype_lever and has_bf16() and not why_no_bf16() and all(c.startswith("cpu") for c in contexts):
        # bfloat16 mixed precision: a lever of the arithmetic, so only where it can pay (AMX, AVX512-BF16)
        stages.append(("dtype", dtype))
    return stages


def levers(base, contexts, batch_sizes, kvstores, cores=None, runner=None):
    """The lever stages of `runner` (its own `levers`; None: those of a runner that takes no data nor
    dtype, as the steprate worker). `base` and `batch_sizes` are not read (kept for the callers)."""
    if runner is not None:
        return runner.levers(contexts, batch_sizes, kvstores, cores)
    return model_levers(contexts, kvstores, cores)


# every lever `model_levers` can make, in its order (the names tune --levers takes)
LEVER_NAMES = ("threads", "hybridize", "data", "engine", "onednn", "allocator", "bulk", "optimizer", "openmp",
               "contexts", "dtype")

# What a lever needs to have a candidate besides its baseline (the others always have one)
LEVER_NEEDS = {"threads": "more than one core", "data": "the train runner (the default)",
               "allocator": "jemalloc or tcmalloc installed, or glibc's transparent huge pages left to madvise",
               "contexts": "several contexts in --ctx",
               "optimizer": "--optimizer sgd or adamw (the others have one implementation)",
               "dtype": "the train runner (the default), CPU contexts and a CPU with AMX or AVX512-BF16"}
