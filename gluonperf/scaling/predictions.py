"""Scaling predictions as records: `scaling.model.sweep` for every N x M (bench 'predict'),
and the most devices per machine that keep an efficiency (bench 'predict-best').

Nothing here parses arguments or prints.
"""
from dataclasses import replace

from . import model as scaling_model
from ..records import result


def device_step(measured, per_device_batch=None):
    """The one-device step a prediction starts from (`scaling_model.Step`), from a measured step
    (`parts`: t1_s, update_s, per_device_batch and, when known, cpu_s). With a `per_device_batch`
    other than the measured one, t1 and the worker's CPU seconds are scaled linearly with it (an
    assumption: small batches run below the device's peak, so this overestimates their speed).
    The update is not: every device updates all the weights (Trainer with
    update_on_kvstore=False), whatever its batch, in the time of the optimizer measured (an Adam
    update costs more than SGD's: bench optimizers)."""
    batch = per_device_batch or measured["per_device_batch"]
    factor = batch / measured["per_device_batch"]
    cpu = measured.get("cpu_s")
    return scaling_model.Step(measured["t1_s"] * factor, batch, measured["update_s"],
                              None if cpu is None else cpu * factor)


def prediction_results(model, step, gradients, devices, machines, exchange, machine=scaling_model.Machine(),
                       lr=scaling_model.LinearScaling()):
    """Results (bench 'predict') for every N x M of `devices` x `machines`, from one device's
    `step` (`device_step`) and the model's `gradients`, summed as `exchange` says. With the
    `machine`'s cores and the step's worker CPU seconds, the compute lasts at least the devices'
    CPU time over the cores (`scaling_model.cores_bound_s`); without either, neither counts."""
    if not (machine.cores and step.worker_cpu_s is not None):
        step, machine = replace(step, worker_cpu_s=None), replace(machine, cores=None)
    rows = scaling_model.sweep(step, gradients, devices, machines, exchange, machine, lr)
    horovod = exchange.engine == "horovod"
    inter = exchange.inter
    out = []
    for r in rows:
        name = "%dx%d" % (r["devices"], r["machines"])
        extra = (dict(fusion_threshold_bytes=exchange.horovod.fusion_threshold,
                      cycle_time_s=exchange.horovod.cycle_time_s) if horovod else {})
        out.append(result("predict", name, model=model, grad_bytes=gradients.nbytes, keys=gradients.keys,
                          machine_link=exchange.intra.name,
                          network_link=inter.name if inter and r["machines"] > 1 else None,
                          placement=exchange.placement if r["machines"] > 1 and not horovod else None,
                          **extra, **r))
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
