"""The arithmetic of data-parallel scaling: step time from compute t1 and communication t2.

Pure functions, no MXNet. A synchronous step costs one device's share of compute (t1) and the
gradients' sum (t2): max(t1, t2) with overlap, t1 + t2 without, plus the optimizer update. t2
is a ring allreduce within a machine, the parameter servers' busiest link across machines
(`colocated` or `dedicated`, one round trip of latency per key), or Horovod's flat ring with
its cycles and fusion buffers; where processes share a machine's cores, compute lasts at least
their CPU time over the cores. The formulas, their sources (Horovod 0.28.1's code, Goyal et al.
2017 for the learning rate) and how they were checked: docs/commands/predict.md, "How it works".
"""
import math
from dataclasses import dataclass
from typing import Optional

from .. import UserError

GB = 1e9


@dataclass(frozen=True)
class Link:
    """A link between devices or machines: bandwidth per direction, per-message latency."""
    name: str
    GBps: float          # GB/s (1e9 bytes/s) per direction
    latency_s: float
    scope: str           # "machine" (between devices of one machine) or "network"
    source: str
    shared: bool = False  # every device's traffic goes through this one link

    @property
    def Bps(self):
        return self.GBps * GB


# Nominal rates (what the standard or the vendor states); real transfers reach less
# (NCCL reaches ~80% of PCIe / NVLink, TCP ~90% of Ethernet line rate). Prefer a
# measured bandwidth (`bench allreduce --json`, field bus_GBps) where you have one.
# Latencies are orders of magnitude, not measurements: a few microseconds per
# message on PCIe / NVLink (NCCL's per-step latency), tens of microseconds for TCP
# through one switch.
LINKS = {
    "pcie3": Link("pcie3", 15.75, 5e-6, "machine",
                  "PCIe 3.0 x16: 8 GT/s x 16 lanes, 128b/130b encoding = 15.75 GB/s per direction "
                  "(PCI-SIG, PCI Express Base Specification 3.0)"),
    "pcie4": Link("pcie4", 31.5, 5e-6, "machine",
                  "PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s per direction "
                  "(PCI-SIG, PCI Express Base Specification 4.0)"),
    "nvlink2": Link("nvlink2", 150.0, 3e-6, "machine",
                    "NVLink 2 on V100 SXM2: 6 links x 25 GB/s = 150 GB/s per direction per GPU "
                    "(NVIDIA Tesla V100 GPU Architecture whitepaper, 2017)"),
    "nvlink3": Link("nvlink3", 300.0, 3e-6, "machine",
                    "NVLink 3 on A100 SXM4: 12 links x 25 GB/s = 300 GB/s per direction per GPU "
                    "(NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020)"),
    "10gbe": Link("10gbe", 1.25, 30e-6, "network",
                  "10 Gigabit Ethernet: 10 Gbit/s = 1.25 GB/s per direction (IEEE 802.3ae)"),
    "25gbe": Link("25gbe", 3.125, 30e-6, "network",
                  "25 Gigabit Ethernet: 25 Gbit/s = 3.125 GB/s per direction (IEEE 802.3by)"),
    "100gbe": Link("100gbe", 12.5, 30e-6, "network",
                   "100 Gigabit Ethernet: 100 Gbit/s = 12.5 GB/s per direction (IEEE 802.3ba)"),
}
NVLINK = "nvlink2"  # what plain "nvlink" means
PLACEMENTS = ("colocated", "dedicated")
ENGINES = ("ps", "horovod")  # as gluonperf.launch --engine names them: parameter server (dist_sync), Horovod

# Horovod 0.28.1's defaults (horovod/common/operations.cc; horovodrun --fusion-threshold-mb and
# --cycle-time-ms, or the environment variables HOROVOD_FUSION_THRESHOLD in bytes and
# HOROVOD_CYCLE_TIME in ms, change them).
HOROVOD_FUSION_THRESHOLD = 128 * 2 ** 20  # bytes
HOROVOD_CYCLE_TIME_S = 1e-3
@dataclass(frozen=True)
class HorovodSettings:
    """Horovod's two tunables the model counts: its fusion buffer in bytes (0: fusion off) and
    its cycle time."""
    fusion_threshold: int = HOROVOD_FUSION_THRESHOLD
    cycle_time_s: float = HOROVOD_CYCLE_TIME_S


# Backward's share of forward + backward (t1): about twice the forward's arithmetic, so 2/3
# (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", arXiv:2001.08361: 2N
# operations per parameter forward, 4N backward). Horovod's cycles fuse what becomes ready over it.
BACKWARD_SHARE = 2.0 / 3.0

# Goyal et al. 2017: warm-up epochs with the linear scaling rule, and the largest
# global batch they found to keep accuracy.
WARMUP_EPOCHS = 5
LARGEST_SAFE_BATCH = 8192


def link(name):
    """A named link from LINKS (case and '-'/'_' ignored; 'nvlink' is NVLink 2)."""
    key = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    key = NVLINK if key == "nvlink" else key
    if key not in LINKS:
        raise UserError("unknown link %r; choose one of %s, or give a measured bandwidth"
                        % (name, ", ".join(["nvlink"] + sorted(LINKS))))
    return LINKS[key]


def measured_link(GBps, latency_s=0.0, name="measured", scope="machine", shared=False, source="measured"):
    if not GBps > 0:
        raise UserError("a link's bandwidth must be above 0 GB/s (got %r)" % GBps)
    if latency_s < 0:
        raise UserError("a link's latency must be 0 or more (got %r)" % latency_s)
    return Link(name, float(GBps), float(latency_s), scope, source, shared)


# --- communication ---------------------------------------------------------------

def ring_bytes(nbytes, n):
    """Bytes each of n devices sends (and receives) in a ring allreduce of nbytes."""
    return 0.0 if n <= 1 else 2.0 * (n - 1) / n * nbytes


def ring_allreduce_s(nbytes, n, lnk, keys=1):
    """Time of a ring allreduce of nbytes over n devices on link `lnk`, in `keys` arrays
    (MXNet's kvstore reduces every parameter array on its own: the latency is paid per key)."""
    if n <= 1:
        return 0.0
    moved = ring_bytes(nbytes, n) * (n if lnk.shared else 1)
    return 2 * (n - 1) * keys * lnk.latency_s + moved / lnk.Bps


def ps_bytes(nbytes, machines, servers, placement="colocated"):
    """Bytes per direction through the busiest NIC when `machines` workers push and pull
    nbytes each through `servers` parameter servers."""
    if placement not in PLACEMENTS:
        raise UserError("unknown server placement %r; choose one of %s" % (placement, ", ".join(PLACEMENTS)))
    if servers < 1 or machines < 1:
        raise UserError("need at least 1 server and 1 machine (got %d, %d)" % (servers, machines))
    if placement == "dedicated":
        return max(float(nbytes), machines * nbytes / servers)
    if servers > machines:
        raise UserError("%d servers colocated on %d machines: at most one server per machine; "
                        "use dedicated placement" % (servers, machines))
    return nbytes * (servers - 1) / servers + (machines - 1) * nbytes / servers


def ps_sync_s(nbytes, machines, servers, lnk, placement="colocated", keys=1, compute_units=None):
    """Time for `machines` workers to push nbytes to `servers` parameter servers and pull
    the sum back (dist_sync). On a shared link (every process on one machine) all
    2 * machines * nbytes go through it, and the servers handle the 2 * keys * machines
    messages of a step, each costing the link's latency in CPU time, min(servers,
    compute_units) at a time."""
    if lnk.shared:
        if servers < 1 or machines < 1:
            raise UserError("need at least 1 server and 1 worker (got %d, %d)" % (servers, machines))
        parallel = min(servers, compute_units or servers)
        return 2 * keys * machines * lnk.latency_s / parallel + 2.0 * machines * nbytes / lnk.Bps
    return 2 * keys * lnk.latency_s + ps_bytes(nbytes, machines, servers, placement) / lnk.Bps


def communication_s(nbytes, devices, machines, intra, inter=None, servers=None, placement="colocated", keys=1):
    """(t_machine, t_network): ring within each machine, then parameter servers across."""
    t_intra = ring_allreduce_s(nbytes, devices, intra, keys)
    if machines <= 1:
        return t_intra, 0.0
    if inter is None:
        raise UserError("more than one machine needs a network link")
    return t_intra, ps_sync_s(nbytes, machines, servers or machines, inter, placement, keys)


def fused_buffers(nbytes, keys, fusion_threshold=HOROVOD_FUSION_THRESHOLD, backward_s=None,
                  cycle_time_s=HOROVOD_CYCLE_TIME_S):
    """The allreduces Horovod runs a step for `keys` gradient arrays of `nbytes` in all. A cycle
    packs the arrays that are ready into buffers of at most `fusion_threshold` bytes: at least
    ceil(nbytes / threshold) of them (one per array with a threshold of 0, fusion off). Given
    the step's `backward_s`, the arrays become ready at an even pace over backward and each
    cycle takes those that became ready since the last one: about ceil(backward / cycle)
    buffers (one per array with a cycle of 0). The larger of the two, at most one per array."""
    if keys < 1 or nbytes < 0 or fusion_threshold < 0 or cycle_time_s < 0 or (backward_s or 0) < 0:
        raise UserError("need at least 1 array, and bytes, a fusion threshold, a cycle time and a backward time "
                        "of 0 or more (got keys=%r, bytes=%r, threshold=%r, cycle=%r, backward=%r)"
                        % (keys, nbytes, fusion_threshold, cycle_time_s, backward_s))
    by_size = keys if fusion_threshold == 0 else math.ceil(nbytes / fusion_threshold)
    by_arrival = 1
    if backward_s:
        by_arrival = keys if cycle_time_s == 0 else math.ceil(round(backward_s / cycle_time_s, 9))
    return int(max(1, min(keys, max(by_size, by_arrival))))


def horovod_allreduce_s(nbytes, ranks, lnk, keys=1, fusion_threshold=HOROVOD_FUSION_THRESHOLD,
                        cycle_time_s=HOROVOD_CYCLE_TIME_S, backward_s=None):
    """One step's allreduce of nbytes in `keys` arrays by Horovod over `ranks` processes on link
    `lnk`: half a cycle's wait, the cycle's agreement (a ring allreduce of a few bytes), and a
    ring allreduce per buffer (`fused_buffers`, from `backward_s` when given). One rank
    exchanges nothing (Horovod's DistributedTrainer skips the allreduce)."""
    if ranks <= 1:
        return 0.0
    buffers = fused_buffers(nbytes, keys, fusion_threshold, backward_s, cycle_time_s)
    return cycle_time_s / 2 + ring_allreduce_s(0, ranks, lnk) + ring_allreduce_s(nbytes, ranks, lnk, keys=buffers)


def flat_ring_link(intra, inter, machines):
    """The link a flat ring over the devices of `machines` machines runs at: `intra` on one
    machine; across machines every step waits for the slowest edge, so the lower bandwidth and
    the higher latency of the two (in practice the network's)."""
    if machines <= 1:
        return intra
    if inter is None:
        raise UserError("more than one machine needs a network link")
    slow = min((intra, inter), key=lambda l: l.GBps)
    return Link("%s+%s" % (intra.name, inter.name), slow.GBps, max(intra.latency_s, inter.latency_s),
                "network", "flat ring: the slower of %s and %s" % (intra.name, inter.name),
                intra.shared or inter.shared)


def horovod_communication_s(nbytes, devices, machines, intra, inter=None, keys=1, horovod=None, backward_s=None):
    """(t_machine, t_network) of Horovod's flat ring over devices * machines ranks, with
    `horovod`'s fusion threshold and cycle (default: Horovod's own): on one machine all of it is
    t_machine; across machines the whole ring runs at the network's pace and is counted as
    t_network."""
    horovod = horovod or HorovodSettings()
    t = horovod_allreduce_s(nbytes, devices * machines, flat_ring_link(intra, inter, machines), keys,
                            horovod.fusion_threshold, horovod.cycle_time_s, backward_s)
    return (t, 0.0) if machines <= 1 else (0.0, t)


def oversubscribed(runnable, cores):
    """True when more threads want a core at once than the machine has: `runnable` counts the
    workers' compute threads (workers x OpenMP threads) and every process or thread that must
    run at each exchange beside them (a parameter server, ps-lite's scheduler, a Horovod rank's
    background thread, which wakes every cycle). Then the cores, not the devices, bound the
    compute: `cores_bound_s` counts the CPU time of all of them (2 dist_sync workers with 2
    servers and the scheduler are 5 threads on 2 cores here)."""
    if runnable < 1 or cores < 1:
        raise UserError("need at least 1 runnable thread and 1 core (got %r, %r)" % (runnable, cores))
    return runnable > cores


def step_s(t1, t2, update_s=0.0, overlap=True):
    """A step: max(t1, t2) when communication overlaps compute, t1 + t2 when not; plus the update."""
    return (max(t1, t2) if overlap else t1 + t2) + update_s


def compute_s(t1, devices, compute_units=None):
    """t1 of each of `devices` devices running at once when only `compute_units` of them can
    compute without slowing the others (devices sharing one CPU's cores); None: independent."""
    if compute_units is None:
        return t1
    return t1 * max(1.0, devices / compute_units)


def cores_bound_s(worker_cpu_s, processes, cores, helper_cpu_s=0.0):
    """The shortest a step's compute can be when `processes` workers (or devices, each with a
    worker's threads) share `cores` cores: the CPU time all of them spend in the step divided by
    the cores. `worker_cpu_s` is one worker's CPU seconds per step measured alone, every thread
    of it (MXNet's engine threads and the Python thread that feeds them); `helper_cpu_s` what the
    threads and processes beside the workers spend in the step (Horovod's background threads,
    which cycle through all of it)."""
    if worker_cpu_s < 0 or helper_cpu_s < 0 or processes < 1 or cores < 1:
        raise UserError("need CPU times of 0 or more, at least 1 process and 1 core (got worker %r s, helpers "
                        "%r s, %r processes, %r cores)" % (worker_cpu_s, helper_cpu_s, processes, cores))
    return (processes * worker_cpu_s + helper_cpu_s) / cores


def helpers_share_s(compute_s, helper_cores, cores):
    """How long a compute that keeps all `cores` cores busy (`compute_s`, measured with nothing
    beside it) lasts when helper threads keep `helper_cores` cores busy on average while it runs
    (Horovod's background threads, busy for as long as the step lasts: docs/commands/predict.md,
    "Processes that share the cores"): the compute gets the cores the helpers leave."""
    if compute_s < 0 or helper_cores < 0 or cores < 1 or helper_cores >= cores:
        raise UserError("need a compute of 0 s or more and helpers that leave some of the cores (got %r s, helpers "
                        "%r of %r cores)" % (compute_s, helper_cores, cores))
    return compute_s * cores / (cores - helper_cores)


def linear_scaled_lr(base_lr, base_batch, global_batch):
    """The linear scaling rule: base_lr for base_batch, scaled by global_batch / base_batch."""
    return base_lr * global_batch / base_batch


def warmup_epochs(base_batch, global_batch):
    """Epochs of linear warm-up the scaled learning rate needs (Goyal et al.: 5 when it grows)."""
    return WARMUP_EPOCHS if global_batch > base_batch else 0


# --- a prediction ------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One device's step as measured: the compute t1 (forward and backward) of `per_device_batch`
    images, the optimizer's update, and one worker's CPU seconds a step (every thread of its
    process, measured alone; None: not known)."""
    t1_s: float
    per_device_batch: int
    update_s: float = 0.0
    worker_cpu_s: Optional[float] = None


@dataclass(frozen=True)
class Gradients:
    """What a step exchanges: `nbytes` bytes of gradients in `keys` arrays."""
    nbytes: float
    keys: int = 1


@dataclass(frozen=True)
class Exchange:
    """How the gradients are summed: on `engine` 'ps', a ring over `intra` within a machine, then
    dist_sync over `inter` across machines with `servers` parameter servers (default: one per
    machine) placed `placement`; on 'horovod', one flat ring over every device with `horovod`'s
    fusion and cycle. `overlap`: the exchange hides behind the compute (step = max(t1, t2) +
    update) or not (t1 + t2 + update)."""
    intra: Link
    inter: Optional[Link] = None
    engine: str = "ps"
    servers: Optional[int] = None
    placement: str = "colocated"
    overlap: bool = True
    horovod: HorovodSettings = HorovodSettings()


@dataclass(frozen=True)
class Machine:
    """What the processes of one machine share: `cores` CPU cores (None: cores to spare, no
    bound), on which `compute_units` devices compute at once without slowing each other (None:
    every device computes on its own), and `helper_cpu_s`, the CPU seconds a step of the
    processes and threads beside the workers (colocated servers, Horovod's background threads)."""
    cores: Optional[int] = None
    compute_units: Optional[int] = None
    helper_cpu_s: float = 0.0


@dataclass(frozen=True)
class LinearScaling:
    """The linear scaling rule's starting point: learning rate `lr` for a global batch of `batch`."""
    lr: float = 0.1
    batch: int = 256


def predict(step, gradients, devices, machines, exchange, machine=Machine(), lr=LinearScaling()):
    """One configuration: `devices` devices per machine x `machines` machines, their gradients
    summed as `exchange` says. With the machine's `cores` and the step's `worker_cpu_s`, the
    compute lasts at least `cores_bound_s` of the devices' workers and the machine's helpers.
    Returns a dict of step time, images/s, speedup and efficiency against one device (t1 +
    update), whether communication exceeds compute, and the batch and learning rate it implies
    (`lr`, scaled linearly)."""
    t1, per_device_batch, grad_bytes, keys = step.t1_s, step.per_device_batch, gradients.nbytes, gradients.keys
    engine, cores, worker_cpu_s = exchange.engine, machine.cores, step.worker_cpu_s
    if t1 <= 0 or per_device_batch < 1 or grad_bytes < 0 or devices < 1 or machines < 1:
        raise UserError("need t1 > 0, a per-device batch, gradient bytes, devices and machines of at "
                        "least 1 (got t1=%r, batch=%r, bytes=%r, N=%r, M=%r)"
                        % (t1, per_device_batch, grad_bytes, devices, machines))
    if engine not in ENGINES:
        raise UserError("unknown engine %r; choose one of %s" % (engine, ", ".join(ENGINES)))
    share = compute_s(1.0, devices, machine.compute_units)
    t1_n, upd = t1 * share, step.update_s * share
    bound = None
    if cores is not None and worker_cpu_s is not None:
        bound = cores_bound_s(worker_cpu_s, devices, cores, machine.helper_cpu_s)
        t1_n = max(t1_n, bound - upd)  # worker_cpu_s is a whole step's, the update's included
    backward = BACKWARD_SHARE * t1_n
    horovod = engine == "horovod"
    if horovod:
        servers = None
        t_intra, t_inter = horovod_communication_s(grad_bytes, devices, machines, exchange.intra, exchange.inter,
                                                   keys, exchange.horovod, backward)
    else:
        servers = exchange.servers or machines
        t_intra, t_inter = communication_s(grad_bytes, devices, machines, exchange.intra, exchange.inter, servers,
                                           exchange.placement, keys)
    t2 = t_intra + t_inter
    step_time = step_s(t1_n, t2, upd, exchange.overlap)
    total = devices * machines
    global_batch = per_device_batch * total
    rate = global_batch / step_time
    base = per_device_batch / (t1 + step.update_s)
    speedup = rate / base
    return dict(engine=engine, devices=devices, machines=machines, servers=servers if machines > 1 else None,
                buffers=(fused_buffers(grad_bytes, keys, exchange.horovod.fusion_threshold, backward,
                                       exchange.horovod.cycle_time_s)
                         if horovod and total > 1 else None),
                total_devices=total, per_device_batch=per_device_batch, global_batch=global_batch,
                cores=cores, worker_cpu_s=worker_cpu_s, cores_bound_s=bound, t1_s=t1_n, t2_s=t2,
                t2_machine_s=t_intra, t2_network_s=t_inter, update_s=upd,
                step_s=step_time, overlap=exchange.overlap, images_per_s=rate, speedup=speedup,
                efficiency=speedup / total, comm_bound=t2 > t1_n,
                lr=linear_scaled_lr(lr.lr, lr.batch, global_batch),
                warmup_epochs=warmup_epochs(lr.batch, global_batch),
                batch_too_large=global_batch > LARGEST_SAFE_BATCH)


def sweep(step, gradients, devices_list, machines_list, exchange, machine=Machine(), lr=LinearScaling()):
    """`predict` for every (N, M) in devices_list x machines_list (machines outer)."""
    return [predict(step, gradients, n, m, exchange, machine, lr) for m in machines_list for n in devices_list]


def largest_efficient(rows, min_efficiency):
    """Per machine count: the row with the most devices per machine whose efficiency is at
    least min_efficiency (None when even the fewest devices fall short)."""
    best = {}
    for row in rows:
        m = row["machines"]
        best.setdefault(m, None)
        if row["efficiency"] >= min_efficiency and (best[m] is None or row["devices"] > best[m]["devices"]):
            best[m] = row
    return best


def relative_error(predicted, measured):
    """(predicted - measured) / measured."""
    return (predicted - measured) / measured
