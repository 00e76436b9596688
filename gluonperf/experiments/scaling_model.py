"""The arithmetic of data-parallel scaling: step time from compute t1 and communication t2.

Pure functions, no MXNet. The book's model (multi-GPU chapter): on N devices a
synchronous SGD step costs the compute of one device's share of the batch, t1, plus
the time to sum the gradients, t2; about max(t1, t2) when communication overlaps
compute (gradients of the last layers are summed while earlier layers still run
backward) and t1 + t2 when it does not. The optimizer update runs after the sum and
is added in both cases.

Communication (B = gradient bytes, float32 = 4 bytes per trainable parameter):
- ring allreduce over n devices (`device` / `nccl` kvstore within a machine): each
  device sends and receives 2(n-1)/n * B in 2(n-1) steps,
      t = 2(n-1) * latency + 2(n-1)/n * B / bandwidth;
  on a `shared` link (CPU contexts of one machine: every copy goes through the same
  memory system) the n devices' traffic is serialised: n * 2(n-1)/n * B / bandwidth.
- parameter servers (`dist_sync`, S servers, M machines, each machine pushes its summed
  gradient B and pulls the new sum B; server s holds B/S of every key):
  * `colocated` (server i on machine i, as `gluonperf.launch --hostfile` places them):
    the busiest NIC, on a machine with a server, carries per direction its worker's
    traffic to the other servers, B(S-1)/S, plus its server's traffic with the other
    workers, (M-1)B/S. With S = M that is 2(M-1)/M * B, the ring's figure.
  * `dedicated` servers: a worker's NIC carries B, a server's M*B/S; the larger counts.
  * on a `shared` link (loopback: every worker and server on one machine) all 2*M*B
    bytes go through it one after the other.
  Every key (parameter array) is its own push and pull: one round trip of latency per key.
- N devices per machine x M machines with dist_sync: the devices of a machine first
  sum their gradients (ring, machine link), then the machine talks to the servers
  (network link); the two stages are added (no overlap assumed between them).

Learning rate: the global batch is N*M times the per-device batch; the linear scaling
rule (Goyal et al. 2017, "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
arXiv:1706.02677) multiplies the learning rate by the same factor and warms it up
linearly over the first 5 epochs; they report it holding ImageNet accuracy up to a
global batch of 8192, and failing beyond.
"""
from dataclasses import dataclass

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


def step_s(t1, t2, update_s=0.0, overlap=True):
    """A step: max(t1, t2) when communication overlaps compute, t1 + t2 when not; plus the update."""
    return (max(t1, t2) if overlap else t1 + t2) + update_s


def compute_s(t1, devices, compute_units=None):
    """t1 of each of `devices` devices running at once when only `compute_units` of them can
    compute without slowing the others (devices sharing one CPU's cores); None: independent."""
    if compute_units is None:
        return t1
    return t1 * max(1.0, devices / compute_units)


def linear_scaled_lr(base_lr, base_batch, global_batch):
    """The linear scaling rule: base_lr for base_batch, scaled by global_batch / base_batch."""
    return base_lr * global_batch / base_batch


def warmup_epochs(base_batch, global_batch):
    """Epochs of linear warm-up the scaled learning rate needs (Goyal et al.: 5 when it grows)."""
    return WARMUP_EPOCHS if global_batch > base_batch else 0


# --- a prediction ------------------------------------------------------------------

def predict(t1, per_device_batch, grad_bytes, devices, machines, intra, inter=None, servers=None,
            update_s=0.0, overlap=True, placement="colocated", compute_units=None,
            base_lr=0.1, base_batch=256, keys=1):
    """One configuration: N devices per machine x M machines. Returns a dict of
    step time, images/s, speedup and efficiency against one device (t1 + update),
    whether communication exceeds compute, and the batch and learning rate it implies."""
    if t1 <= 0 or per_device_batch < 1 or grad_bytes < 0 or devices < 1 or machines < 1:
        raise UserError("need t1 > 0, a per-device batch, gradient bytes, devices and machines of at "
                        "least 1 (got t1=%r, batch=%r, bytes=%r, N=%r, M=%r)"
                        % (t1, per_device_batch, grad_bytes, devices, machines))
    servers = servers or machines
    t_intra, t_inter = communication_s(grad_bytes, devices, machines, intra, inter, servers, placement, keys)
    t2 = t_intra + t_inter
    share = compute_s(1.0, devices, compute_units)
    t1_n, upd = t1 * share, update_s * share
    step = step_s(t1_n, t2, upd, overlap)
    total = devices * machines
    global_batch = per_device_batch * total
    rate = global_batch / step
    base = per_device_batch / (t1 + update_s)
    speedup = rate / base
    return dict(devices=devices, machines=machines, servers=servers if machines > 1 else None,
                total_devices=total, per_device_batch=per_device_batch, global_batch=global_batch,
                t1_s=t1_n, t2_s=t2, t2_machine_s=t_intra, t2_network_s=t_inter, update_s=upd,
                step_s=step, overlap=overlap, images_per_s=rate, speedup=speedup,
                efficiency=speedup / total, comm_bound=t2 > t1_n,
                lr=linear_scaled_lr(base_lr, base_batch, global_batch),
                warmup_epochs=warmup_epochs(base_batch, global_batch),
                batch_too_large=global_batch > LARGEST_SAFE_BATCH)


def sweep(t1, per_device_batch, grad_bytes, devices_list, machines_list, intra, inter=None,
          servers=None, **kw):
    """`predict` for every (N, M) in devices_list x machines_list (machines outer)."""
    return [predict(t1, per_device_batch, grad_bytes, n, m, intra, inter,
                    servers if servers else m, **kw)
            for m in machines_list for n in devices_list]


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
