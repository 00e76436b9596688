"""Scaling predictions as records: `scaling.model.sweep` for every N x M (bench 'predict'),
and the most devices per machine that keep an efficiency (bench 'predict-best').

Nothing here parses arguments or prints.
"""
from . import model as scaling_model
from ..records import result


def prediction_results(model, step, nbytes, devices, machines, intra, inter, servers=None, overlap=True,
                       placement="colocated", base_lr=0.1, base_batch=256, per_device_batch=None,
                       compute_units=None, keys=1, engine="ps",
                       fusion_threshold=scaling_model.HOROVOD_FUSION_THRESHOLD,
                       cycle_time_s=scaling_model.HOROVOD_CYCLE_TIME_S, cores=None):
    """Results (bench 'predict') for every N x M. With a `per_device_batch` other than the
    measured one, t1 is scaled linearly with it (an assumption: small batches run below the
    device's peak, so this overestimates their speed). The update is not: every device updates
    all the weights (Trainer with update_on_kvstore=False), whatever its batch, in the time of
    the optimizer measured (an Adam update costs more than SGD's: bench optimizers). `engine`
    'horovod' predicts Horovod's flat ring with `fusion_threshold` and `cycle_time_s`. With
    `cores` (per machine) and the step's `cpu_s` (a worker's CPU seconds per step, scaled with the
    batch as t1 is), the compute lasts at least the devices' CPU time over the cores
    (`scaling_model.cores_bound_s`)."""
    batch = per_device_batch or step["per_device_batch"]
    factor = batch / step["per_device_batch"]
    cpu = step.get("cpu_s")
    bound = dict(cores=cores, worker_cpu_s=cpu * factor) if cores and cpu is not None else {}
    rows = scaling_model.sweep(step["t1_s"] * factor, batch, nbytes, devices, machines, intra, inter, servers,
                               update_s=step["update_s"], overlap=overlap, placement=placement,
                               base_lr=base_lr, base_batch=base_batch, compute_units=compute_units, keys=keys,
                               engine=engine, fusion_threshold=fusion_threshold, cycle_time_s=cycle_time_s,
                               **bound)
    horovod = engine == "horovod"
    out = []
    for r in rows:
        name = "%dx%d" % (r["devices"], r["machines"])
        extra = dict(fusion_threshold_bytes=fusion_threshold, cycle_time_s=cycle_time_s) if horovod else {}
        out.append(result("predict", name, model=model, grad_bytes=nbytes, keys=keys,
                          machine_link=intra.name, network_link=inter.name if inter and r["machines"] > 1 else None,
                          placement=placement if r["machines"] > 1 and not horovod else None, **extra, **r))
    return out


def best_results(results, min_efficiency):
    """Per machine count, the most devices per machine that keep efficiency >= min_efficiency."""
    best = scaling_model.largest_efficient([r.metrics for r in results], min_efficiency)
    out = []
    for m, row in sorted(best.items()):
        if row is None:
            out.append(result("predict-best", "%d machines" % m, machines=m, devices=None, total_devices=None,
                              efficiency=None, images_per_s=None, min_efficiency=min_efficiency))
        else:
            out.append(result("predict-best", "%d machines" % m, machines=m, devices=row["devices"],
                              total_devices=row["total_devices"], efficiency=row["efficiency"],
                              images_per_s=row["images_per_s"], min_efficiency=min_efficiency))
    return out
