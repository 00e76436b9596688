"""Scaling predictions checked against runs on this machine (`predict --validate`).

`validate_devices(...)` / `validate_dist(...)` / `validate_horovod(...)`: predict what this
machine can run (CPU contexts; dist_sync on loopback and Horovod over Gloo on loopback, both
through `gluonperf.launch`) from its measured parts (`scaling.parts`), measure it (several
samples of the step: the timed steps, or timed epochs of the runs `scaling.runs` starts), and
return predicted vs measured with the interval of measured / predicted and the judgement
(`scaling.judging`: within 25%, outside, or inconclusive) (bench 'predict-check'). A job's
check says how many processes it ran and how many threads wanted a core at once on how many
cores; when they outnumbered the cores (`scaling.model.oversubscribed`) its judgement says so;
the prediction then counts the CPU time of the workers and their helpers against the cores
(`scaling.model.cores_bound_s`).

Nothing here parses arguments or prints.
"""
import os
from dataclasses import replace

from .. import UserError
from . import model as scaling_model, parts, runs
from .judging import check, crowding
from ..training.model_spec import as_spec


def validate_devices(model, per_device_batch, max_devices, steps=5, dataset="synthetic", progress=None):
    """Predict 1..max_devices CPU contexts from the measured 1-context step, the model's
    gradient bytes and the measured copy link; then measure them (training.device_scaling.scaling,
    kvstore device) and compare step times. The contexts share this machine's cores:
    compute_units = cores // OMP threads contexts compute at full speed at once, the compute
    lasts at least every context's CPU time (as one context's step takes it, the Python thread
    that feeds it included) over the cores (`scaling_model.cores_bound_s`) and at least the
    contexts' compute side by side (the run's own t1 at that many contexts, forward and backward
    to a sync with nothing exchanged), and compute and copies do not overlap (they run on the
    same cores)."""
    import mxnet as mx

    from ..runtime.threads import omp_threads, physical_cores
    from ..config import TrainConfig
    from ..training.device_scaling import scaling
    model = as_spec(model)  # a ModelSpec passed on (text: parsed once here); its text in the records
    ctxs = [mx.cpu(i) for i in range(max_devices)]
    config = TrainConfig(model=model, dataset=dataset, batch_size=per_device_batch * max_devices,
                         kvstore="device", steps=steps, hybridize="static", limit=per_device_batch * max_devices)
    nbytes, keys, _ = parts.gradient_bytes(model)
    lnk = parts.copy_link(ctxs[0], ctxs[min(1, max_devices - 1)], nbytes)
    measured = [r.metrics for r in scaling(config, ctxs, steps, progress=progress)]
    step = parts.step_from_scaling(measured)
    threads, cores = omp_threads(), physical_cores()
    units = max(1, cores // threads)
    cpu = measured[0]["cpu_s"]
    out = []
    for m in measured:
        n = m["devices"]
        p = scaling_model.predict(scaling_model.Step(step["t1_s"], per_device_batch, step["update_s"], cpu),
                                  scaling_model.Gradients(nbytes, keys), n, 1,
                                  scaling_model.Exchange(lnk, overlap=False), scaling_model.Machine(cores, units))
        # the contexts' compute side by side, nothing exchanged (the run's t1 at n contexts), as
        # validate_dist's workers side by side: it costs more than the contexts' CPU time
        t1 = max(p["t1_s"], m["t1_s"])
        predicted = scaling_model.step_s(t1, p["t2_s"], p["update_s"], overlap=False)
        out.append(check("device", predicted, m.get("samples_s") or [m["step_s"]], per_device_batch * n,
                         devices=n, workers=1,
                         servers=None, threads=threads, per_device_batch=per_device_batch, t1_s=t1,
                         t2_s=p["t2_s"], measured_t1_s=m["t1_s"], measured_t2_s=m["t2_s"],
                         link_GBps=lnk.GBps, link_latency_s=lnk.latency_s, compute_units=units, keys=keys,
                         worker_cpu_s=cpu, cores_bound_s=p["cores_bound_s"], update_s=p["update_s"], processes=1,
                         cores=cores, load=os.getloadavg()[0], model=model.text))
    return out


def _threads(cores, workers, helpers):
    """OpenMP threads per worker of a job here: the cores the `helpers` (servers and scheduler,
    Horovod's background threads) leave, shared among the workers; at least 1 (`crowding` then
    says the job is oversubscribed)."""
    return max(1, (cores - helpers) // workers)


VALIDATE_LAUNCHES = 3  # runs of each job (and of Horovod's calibration) in a validation


def _launch_note(launches):
    return "epochs of %d runs" % launches if launches > 1 else "epochs"


def validate_dist(settings, configs, launches=VALIDATE_LAUNCHES, progress=None):
    """dist_sync on loopback: for each (workers, servers) in `configs`, predict the step from
    a one-worker run of the same training command (kvstore device, same threads per worker),
    the model's gradient bytes and the measured loopback link, then run it through
    gluonperf.launch and compare. Every process shares this machine's cores: workers get the
    cores the servers and the scheduler leave (`_threads`), and compute_units = cores // threads;
    the compute lasts at least the workers' CPU time (each as measured alone, every thread of
    it) over the cores (`scaling_model.cores_bound_s`; `crowding` says when the threads
    outnumber the cores). The servers' and the scheduler's work is the exchange's, in t2
    (calibrated from a 1-worker run, `runs.ps_link`); the servers answer side by side only on the
    cores the workers' compute threads leave (on a 2-core Zen 5, 2 servers were no faster than 1
    in any of four pairs of jobs: docs/commands/predict.md). Every run is as `settings`
    (`runs.RunSettings`) say: the model, the images per worker, and `repeats` timed epochs of
    `steps` steps after an untimed one, in at most `timeout` seconds; each job runs
    `launches` times: each epoch's step is one sample of the measured step, whose interval the
    prediction is judged against (`judging.judge`). One run of a job is not enough: on a 2-core Zen 5
    runs of the same job differed by more than their epochs did (docs/commands/predict.md)."""
    from ..runtime import guard
    from ..runtime.threads import physical_cores
    model = as_spec(settings.model)  # a ModelSpec passed on (text: parsed once here); its text in the records
    per_worker_batch = settings.batch
    nbytes, keys, _ = parts.gradient_bytes(model)
    lnk = parts.loopback_link(nbytes)
    cores = physical_cores()
    out, singles, coruns = [], {}, {}
    with guard.temp_dir(prefix="gluonperf-predict-") as tmp:
        settings = replace(settings, model=model, env=runs.job_env(), tmp=tmp)
        lnk = runs.ps_link(settings, scaling_model.Gradients(nbytes, keys), lnk, singles, pairs=launches)
        for workers, servers in configs:
            threads = _threads(cores, workers, servers + 1)
            if threads not in singles:  # the measured per-worker step at this thread count
                singles[threads] = runs.single_step(settings, threads)
            single, cpu = singles[threads]
            if (threads, workers) not in coruns:
                coruns[threads, workers] = runs.corun_step(settings, threads, workers)
            corun, corun_cpu = coruns[threads, workers]
            measured = []
            for launch in range(launches):
                measured += runs.run_job(settings, ["-n", str(workers), "-s", str(servers)], workers, "dist_sync",
                                         threads, os.path.join(tmp, "dist-%d-%d-%d.json" % (workers, servers, launch)),
                                         "dist_sync %d workers %d servers" % (workers, servers))
                if progress:  # one tick a run of a job
                    progress()
            units = max(1, cores // threads)
            # every worker process shares the cores: compute_units counts all `workers` of them
            bound = scaling_model.cores_bound_s(cpu, workers, cores)
            t1 = max(scaling_model.compute_s(single, workers, units), bound, corun)
            # the servers answer side by side only on cores the workers' compute threads leave
            t2 = scaling_model.ps_sync_s(nbytes, workers, servers, lnk, keys=keys,
                                        compute_units=max(1, cores - workers * threads))
            predicted = scaling_model.step_s(t1, t2, 0.0, overlap=False)
            out.append(check("dist_sync", predicted, measured, per_worker_batch * workers, what=_launch_note(launches),
                             launches=launches,
                             devices=1, workers=workers, servers=servers, threads=threads,
                             per_device_batch=per_worker_batch, t1_s=t1, t2_s=t2, measured_single_s=single,
                             worker_cpu_s=cpu, helper_cpu_s=0.0, cores_bound_s=bound, corun_step_s=corun,
                             corun_cpu_s=corun_cpu,
                             link_GBps=lnk.GBps, link_latency_s=lnk.latency_s, compute_units=units,
                             processes=workers + servers + 1,  # + ps-lite's scheduler
                             **crowding(workers, threads, {"servers": servers, "scheduler": 1}, cores),
                             load=os.getloadavg()[0], model=model.text))
    return out


def validate_horovod(settings, ranks=(2,), launches=VALIDATE_LAUNCHES, horovod=scaling_model.HorovodSettings(),
                     progress=None):
    """Horovod on this machine: for each number of ranks in `ranks`, predict the step from a
    one-worker run of the same training command (kvstore device, the same threads per rank) and
    Horovod's exchange of the model's gradients measured with a stand-in for the compute
    (`runs.horovod_exchange`: the arrays handed over during the backward, as in training; at the
    fusion threshold and cycle time of `horovod` the runs are given: HOROVOD_FUSION_THRESHOLD,
    HOROVOD_CYCLE_TIME): t2 is the wait for the sums after the compute; then run `gluonperf.launch
    --engine horovod -n N` over `gluonperf.train --kvstore horovod --ctx cpu0` and compare. As
    in `validate_dist`: ranks get the cores their background threads leave (`_threads`), they
    share the cores (compute_units), the compute lasts at least the CPU time of the ranks (each
    as measured alone) and of their background threads (while the stand-in computed) over the
    cores (`scaling_model.cores_bound_s`), and at least the ranks' compute side by side
    (`runs.corun_step`) on the cores the background threads leave (`scaling_model.helpers_share_s`,
    their share measured while the stand-in computed), compute and the exchange do not overlap,
    and each of the `repeats` timed epochs (after an untimed one) of each of `launches` runs of
    the job, every run as `settings` (`runs.RunSettings`) say, is one sample of the step; every
    run follows a calibration of its own, and t2 and the helpers' share are the geometric means
    of those. The record keeps `modelled_t2_s`, the
    exchange as `scaling_model.horovod_allreduce_s` models it on the measured loopback link (Gloo's ring
    runs over TCP on loopback), beside the measured t2 it predicts with."""
    from ..runtime import guard, horovod_launcher
    from ..runtime.threads import physical_cores
    horovod_launcher.require("validating Horovod")
    if any(n < 2 for n in ranks):
        raise UserError("a Horovod validation needs at least 2 ranks a job (got %s)" % ",".join(map(str, ranks)))
    model = as_spec(settings.model)  # a ModelSpec passed on (text: parsed once here); its text in the records
    per_worker_batch, fusion_threshold, cycle_time_s = settings.batch, horovod.fusion_threshold, horovod.cycle_time_s
    shapes = parts.gradient_shapes(model)
    nbytes, keys, _ = parts.gradient_bytes(model)
    lnk = parts.loopback_link(nbytes)
    cores = physical_cores()
    base_env = dict(runs.job_env(), HOROVOD_FUSION_THRESHOLD=str(int(fusion_threshold)),
                    HOROVOD_CYCLE_TIME="%g" % (cycle_time_s * 1e3))
    out, singles, coruns = [], {}, {}
    with guard.temp_dir(prefix="gluonperf-predict-") as tmp:
        settings = replace(settings, model=model, env=base_env, tmp=tmp)
        for n in ranks:
            threads = _threads(cores, n, n)
            if threads not in singles:  # the measured per-rank step at this thread count
                singles[threads] = runs.single_step(settings, threads)
            single, cpu = singles[threads]
            if (threads, n) not in coruns:
                coruns[threads, n] = runs.corun_step(settings, threads, n)
            corun, corun_cpu = coruns[threads, n]
            measured, calibrations = [], []
            for launch in range(launches):  # each run of the job after a calibration of its own
                calibrations.append(runs.horovod_exchange(shapes, n, single,
                                                         dict(base_env, OMP_NUM_THREADS=str(threads)), tmp,
                                                         settings.timeout))
                measured += runs.run_job(settings, ["--engine", "horovod", "-n", str(n)], n, "horovod", threads,
                                         os.path.join(tmp, "horovod-%d-%d.json" % (n, launch)), "horovod %d ranks" % n)
                if progress:  # one tick a run of a job
                    progress()
            t2, helpers, calibrated = (runs.mean_step([c[i] for c in calibrations]) for i in range(3))
            helper_cores = helpers / calibrated  # cores the background threads kept busy meanwhile
            units = max(1, cores // threads)
            bound = scaling_model.cores_bound_s(cpu, n, cores, helpers)
            shared = scaling_model.helpers_share_s(corun, helper_cores, cores)
            t1 = max(scaling_model.compute_s(single, n, units), bound, shared)
            backward = scaling_model.BACKWARD_SHARE * t1
            modelled = scaling_model.horovod_allreduce_s(nbytes, n, lnk, keys, fusion_threshold, cycle_time_s,
                                                        backward)
            buffers = scaling_model.fused_buffers(nbytes, keys, fusion_threshold, backward, cycle_time_s)
            predicted = scaling_model.step_s(t1, t2, 0.0, overlap=False)
            out.append(check("horovod", predicted, measured, per_worker_batch * n, what=_launch_note(launches),
                             launches=launches,
                             devices=1, workers=n, servers=None, threads=threads,
                             per_device_batch=per_worker_batch, t1_s=t1, t2_s=t2, modelled_t2_s=modelled,
                             measured_single_s=single, worker_cpu_s=cpu, helper_cpu_s=helpers,
                             cores_bound_s=bound, corun_step_s=corun, corun_cpu_s=corun_cpu,
                             helper_cores=helper_cores, shared_compute_s=shared,
                             link_GBps=lnk.GBps, link_latency_s=lnk.latency_s, compute_units=units, keys=keys,
                             buffers=buffers, fusion_threshold_bytes=int(fusion_threshold),
                             cycle_time_s=cycle_time_s, processes=n,
                             **crowding(n, threads, {"Horovod background threads": n}, cores),
                             load=os.getloadavg()[0], model=model.text))
    return out
