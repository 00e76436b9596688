"""python -m gluonperf.predict: how far data parallelism scales, from measured parts.

Parses the flags, gets the per-device step (a `train --scaling` JSON, figures given on
the command line, or a fresh measurement), the model's gradient bytes and the links,
and hands the predictions of `gluonperf.scaling` (its model, measured parts and predictions) to
`cli.emit`. With --validate it checks predictions against runs on this machine.
"""
import argparse
import sys
from dataclasses import dataclass

from . import UserError
from .cli import common as cli
from .scaling.validation import VALIDATE_LAUNCHES
from .training.model_spec import label


def _validates_devices(argv):
    """Whether a command line runs --validate's CPU contexts in this process (all or devices);
    the dist and horovod jobs run in processes of their own, each given its threads."""
    for i, a in enumerate(argv):
        if a.startswith("--validate="):
            return a.split("=", 1)[1] in ("all", "devices")
        if a == "--validate":
            return i + 1 >= len(argv) or argv[i + 1] not in ("dist", "horovod")
    return False


THREADS_NOTE = (cli.thread_defaults(sys.argv[1:], at_least=4 if _validates_devices(sys.argv[1:]) else 1)
                if __name__ == "__main__" else None)

PROG = "python -m gluonperf.predict"
COLUMNS = ["name", "global_batch", "t1_s", "t2_s", "step_s", "images_per_s", "speedup", "efficiency",
           "comm_bound", "efficient", "lr", "warmup_epochs"]
BEST_COLUMNS = ["machines", "devices", "total_devices", "efficiency", "images_per_s"]
VALIDATIONS = ("all", "devices", "dist", "horovod")
DIST_CONFIGS = ((2, 1), (2, 2), (4, 1), (4, 2))


def jobs(text):
    """'2x1,4x2' -> ((2, 1), (4, 2)): dist_sync jobs as WORKERSxSERVERS."""
    out = []
    for item in text.split(","):
        w, sep, s = item.strip().lower().partition("x")
        if not (sep and w.isdigit() and s.isdigit() and int(w) >= 1 and int(s) >= 1):
            raise argparse.ArgumentTypeError("%r is not a list of WORKERSxSERVERS jobs, e.g. 2x1,4x2" % text)
        out.append((int(w), int(s)))
    return tuple(out)


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of whole numbers" % text)
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("%r: give whole numbers of at least 1, e.g. 1,2,4,8" % text)
    return sorted(set(values))


def efficiency(text):
    value = cli.positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError("%r: an efficiency is between 0 and 1, e.g. 0.8" % text)
    return value


def build_parser():
    from .config import OPTIMIZERS
    from .scaling.model import ENGINES, HOROVOD_CYCLE_TIME_S, HOROVOD_FUSION_THRESHOLD, LINKS, PLACEMENTS
    p = argparse.ArgumentParser(
        prog=PROG, parents=[cli.common_parser()],
        description="Predict step time, images/s, speedup and parallel efficiency of data-parallel "
                    "training on N devices per machine x M machines, from a measured per-device step "
                    "(compute t1 and the update), the model's gradient bytes and the links: with --engine "
                    "ps a ring allreduce within a machine (kvstore device / nccl) and dist_sync parameter "
                    "servers across machines; with --engine horovod one process per device and Horovod's "
                    "ring allreduce over all of them, with its fusion buffers and cycle. A step is "
                    "max(t1, t2) + update when communication overlaps compute (--overlap yes, the "
                    "default) and t1 + t2 + update when not. --validate checks such predictions against "
                    "runs on this machine instead.")
    cli.add_model_flags(p, "resnet18", help=cli.MODEL_HELP + "; its trainable parameters give the gradient bytes")
    src = p.add_argument_group("the measured per-device step (one of)")
    src.add_argument("--scaling", metavar="JSON",
                     help="python -m gluonperf.train --scaling --json output: t1 and update of its 1-device row")
    src.add_argument("--t1", type=cli.positive_float, metavar="SEC",
                     help="compute time (forward + backward) of one step on one device, measured elsewhere "
                          "(needs --per-device-batch)")
    src.add_argument("--update", type=cli.non_negative_float, default=0.0, metavar="SEC",
                     help="with --t1: the optimizer update's time per step (default: 0)")
    src.add_argument("--cpu", type=cli.positive_float, metavar="SEC",
                     help="with --t1 and --cores: one device's worker CPU seconds per step, every thread of the "
                          "process (MXNet's engine threads and the Python thread that feeds them), measured alone; "
                          "train's records carry it (train_cpu_s per epoch, cpu_s in --scaling rows)")
    src.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                     help="with --measure: the optimizer whose update is measured, once per device and step "
                          "(default: %(default)s)")
    src.add_argument("--measure", action="store_true",
                     help="measure the step now on the first --ctx context (with --per-device-batch, "
                          "--model, synthetic data; 10 steps)")
    p.add_argument("--per-device-batch", type=cli.positive_int, metavar="B",
                   help="images per device per step (default: as measured; otherwise t1 is scaled linearly)")
    p.add_argument("--devices", type=int_list, default=[1, 2, 4, 8], metavar="N,N",
                   help="devices per machine (default: 1,2,4,8)")
    p.add_argument("--machines", type=int_list, default=[1, 2, 8, 64], metavar="M,M",
                   help="machines (default: 1,2,8,64)")
    p.add_argument("--link", default="pcie3",
                   help="link between the devices of a machine: %s (default: %%(default)s)"
                        % ", ".join(["nvlink"] + sorted(k for k, v in LINKS.items() if v.scope == "machine")))
    p.add_argument("--allreduce", metavar="JSON",
                   help="python -m gluonperf.bench allreduce --json output: use its measured bus bandwidth "
                        "as the link within a machine instead of --link")
    p.add_argument("--network", default="25gbe",
                   help="link between machines: %s (default: %%(default)s)"
                        % ", ".join(sorted(k for k, v in LINKS.items() if v.scope == "network")))
    p.add_argument("--network-GBps", type=cli.positive_float, metavar="GBPS",
                   help="a measured network bandwidth in GB/s per direction instead of --network")
    p.add_argument("--engine", choices=ENGINES, default="ps",
                   help="how the gradients are summed, as gluonperf.launch --engine names it: ps (one process "
                        "per machine: kvstore device within it, dist_sync parameter servers across) or horovod "
                        "(one process per device: Horovod's flat ring allreduce over every device of every "
                        "machine, run at the pace of its slowest link) (default: %(default)s)")
    p.add_argument("--fusion-threshold-mb", type=cli.non_negative_float, default=HOROVOD_FUSION_THRESHOLD / 2 ** 20,
                   metavar="MB",
                   help="--engine horovod and --validate horovod: Horovod's fusion buffer in MiB (horovodrun "
                        "--fusion-threshold-mb, HOROVOD_FUSION_THRESHOLD); the gradients go in at least ceil(bytes / "
                        "threshold) allreduces a step (more when backward spans more cycles), one per array with "
                        "0 (default: Horovod's, %(default)g)")
    p.add_argument("--cycle-time-ms", type=cli.non_negative_float, default=HOROVOD_CYCLE_TIME_S * 1e3, metavar="MS",
                   help="--engine horovod and --validate horovod: Horovod's cycle time (horovodrun "
                        "--cycle-time-ms, HOROVOD_CYCLE_TIME); a step's allreduce waits half a cycle on average "
                        "(default: Horovod's, %(default)g)")
    p.add_argument("--cores", type=cli.positive_int, metavar="N",
                   help="CPU cores per machine that its processes share (processes with devices of their own "
                        "still feed them from the CPU): the compute then lasts at least the devices' worker CPU "
                        "time per step (from --scaling, --measure or --cpu) over the cores; --validate also counts "
                        "the servers' and Horovod's background threads, which it measures (default: cores to "
                        "spare, no bound)")
    p.add_argument("--servers", type=cli.positive_int,
                   help="dist_sync parameter servers (default: one per machine; --engine ps only)")
    p.add_argument("--placement", choices=PLACEMENTS, default="colocated",
                   help="colocated: server i on machine i (as gluonperf.launch --hostfile places them); "
                        "dedicated: servers on machines of their own (default: %(default)s)")
    p.add_argument("--overlap", choices=["yes", "no"], default="yes",
                   help="yes: communication hides behind compute, step = max(t1, t2) + update (MXNet's "
                        "engine reduces a layer's gradient as soon as backward produced it); no: "
                        "step = t1 + t2 + update (default: %(default)s)")
    p.add_argument("--lr", type=cli.positive_float, default=0.1, help="learning rate for --lr-batch (default: 0.1)")
    p.add_argument("--lr-batch", type=cli.positive_int, default=256,
                   help="global batch that --lr is meant for; the lr is scaled linearly (default: 256)")
    p.add_argument("--min-efficiency", type=efficiency, default=0.8,
                   help="efficiency threshold for the 'largest N' summary (default: %(default)s)")
    p.add_argument("--list-links", action="store_true", help="list the named links with their sources and exit")
    v = p.add_argument_group("validation on this machine")
    v.add_argument("--validate", nargs="?", const="all", choices=VALIDATIONS,
                   help="instead of predicting: predict and measure what this machine can run, 1..4 cpu "
                        "contexts (devices), dist_sync on loopback with 2 and 4 workers and 1-2 servers "
                        "(dist) and Horovod jobs over Gloo on loopback (horovod; in all when Horovod is "
                        "installed); print predicted vs measured")
    v.add_argument("--validate-model", default="lenet",
                   help="model for --validate, as --model takes it; --model-args, --input-shape, --input-dtype, "
                        "--vocab-size and --loss describe it when it is your own (default: %(default)s)")
    v.add_argument("--validate-batch", type=cli.positive_int, default=64,
                   help="images per device (per worker) for --validate (default: %(default)s)")
    v.add_argument("--validate-steps", type=cli.positive_int, default=10,
                   help="timed steps per configuration for --validate (default: %(default)s)")
    v.add_argument("--validate-repeats", type=cli.positive_int, default=5,
                   help="timed epochs (of --validate-steps steps) per dist_sync or Horovod run, each a sample "
                        "of the measured step, after an untimed one (default: %(default)s)")
    v.add_argument("--validate-launches", type=cli.positive_int, default=VALIDATE_LAUNCHES,
                   help="runs of each dist_sync or Horovod job (Horovod's calibration too), their epochs pooled: "
                        "runs of the same job differ by more than their epochs do (default: %(default)s)")
    v.add_argument("--validate-jobs", type=jobs, default=DIST_CONFIGS, metavar="WxS,...",
                   help="the dist_sync jobs of --validate dist, as WORKERSxSERVERS (default: %s)"
                        % ",".join("%dx%d" % c for c in DIST_CONFIGS))
    v.add_argument("--validate-devices", type=cli.positive_int, default=4,
                   help="most cpu contexts for --validate devices (default: %(default)s)")
    v.add_argument("--validate-ranks", type=int_list, default=[2], metavar="N,N",
                   help="the Horovod jobs of --validate horovod, as ranks (processes) each, at least 2 "
                        "(default: 2)")
    return p


def list_links():
    from .scaling.model import LINKS
    for name, lnk in LINKS.items():
        print("%-8s %-7s %7.3g GB/s  %4.0f us  %s" % (name, lnk.scope, lnk.GBps, lnk.latency_s * 1e6, lnk.source))


def validate(args, ctxs, spec):
    """--validate: predictions held against runs of `spec` (the ModelSpec of --validate-model) here."""
    from .scaling.judging import CHECK_COLUMNS
    from .scaling.runs import RunSettings
    from .scaling.validation import validate_devices, validate_dist, validate_horovod
    from .runtime import horovod_launcher
    results = []
    kinds = ("devices", "dist", "horovod") if args.validate == "all" else (args.validate,)
    if args.validate == "all" and not horovod_launcher.available():
        cli.note("note: Horovod is not installed, so --validate leaves its jobs out; install it with %s"
                 % horovod_launcher.INSTALL)
        kinds = ("devices", "dist")
    if "horovod" in kinds and min(args.validate_ranks) < 2:
        raise UserError("--validate-ranks: a Horovod job needs at least 2 ranks to exchange anything (got %s)"
                        % ",".join(map(str, args.validate_ranks)))
    total = (args.validate_devices * args.validate_steps if "devices" in kinds else 0) + \
            (len(args.validate_jobs) * args.validate_launches if "dist" in kinds else 0) + \
            (len(args.validate_ranks) * args.validate_launches if "horovod" in kinds else 0)
    with cli.progress_bar(total, "validate") as bar:
        if "devices" in kinds:
            results += validate_devices(spec, args.validate_batch, args.validate_devices,
                                        args.validate_steps, progress=bar.update)
        runs = RunSettings(spec, args.validate_batch, args.validate_steps, args.validate_repeats)
        if "dist" in kinds:
            results += validate_dist(runs, args.validate_jobs, args.validate_launches, progress=bar.update)
        if "horovod" in kinds:
            results += validate_horovod(runs, args.validate_ranks, args.validate_launches, horovod_settings(args),
                                        progress=bar.update)
    counts = {w: sum(1 for r in results if r.metrics["within_25pct"] is v)
              for w, v in (("within", True), ("outside", False), ("inconclusive", None))}
    over = [r.metrics for r in results if r.metrics.get("oversubscribed")]
    load = results[-1].metrics["load"]
    cli.emit(results, args, ctxs, columns=CHECK_COLUMNS,
             title="predicted vs measured on this machine: %s, %d images per device/worker, %d steps; "
                   "load average %.1f (the cores are shared); measured/predicted with its 95%% CI: within 25%% "
                   "in %d, outside in %d, inconclusive in %d%s"
                   % (spec.label, args.validate_batch, args.validate_steps, load, counts["within"],
                      counts["outside"], counts["inconclusive"],
                      "; %d of %d measured oversubscribed (more threads wanting a core than the %d cores: the "
                      "compute is bounded by their CPU time over the cores)" % (len(over), len(results), over[0]["cores"])
                      if over else ""))
    for r in results:
        print("  %s: %s" % (r.name, r.metrics["judgement"]))
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if args.list_links:
        list_links()
        return 0
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    if args.validate:
        import mxnet as mx
        model_flags = argparse.Namespace(**dict(vars(args), model=args.validate_model))
        spec = cli.resolve_model(model_flags)  # passed on as the object; its text to the runs
        n = args.validate_devices if args.validate in ("all", "devices") else 1
        cli.advise([mx.cpu(i) for i in range(n)], THREADS_NOTE)  # the most run at once
        return validate(args, ctxs, spec)
    spec = cli.resolve_model(args)  # unknown names and models that do not run fail here
    given = [bool(args.scaling), args.t1 is not None, args.measure]
    if sum(given) != 1:
        raise UserError("give the measured per-device step with exactly one of --scaling JSON, --t1 SEC "
                        "(with --per-device-batch) or --measure")
    if args.t1 is not None and not args.per_device_batch:
        raise UserError("--t1 needs --per-device-batch: the images one device computes in that time")
    if args.cpu is not None and args.t1 is None:
        raise UserError("--cpu goes with --t1; --scaling and --measure carry the worker's CPU time themselves")
    intra, inter = links(args)

    from .scaling import model as scaling_model, parts, predictions
    if args.allreduce:
        intra = parts.link_from_allreduce(parts.read_records(args.allreduce, "allreduce"))
    step = measured_step(args, spec, ctxs)
    nbytes, keys, _ = parts.gradient_bytes(spec)
    fusion = int(args.fusion_threshold_mb * 2 ** 20)
    exchange = scaling_model.Exchange(intra, inter, engine=args.engine, servers=args.servers,
                                      placement=args.placement, overlap=args.overlap == "yes",
                                      horovod=horovod_settings(args))
    results = predictions.prediction_results(
        spec.text, predictions.device_step(step, args.per_device_batch), scaling_model.Gradients(nbytes, keys),
        args.devices, args.machines, exchange, scaling_model.Machine(cores=args.cores),
        scaling_model.LinearScaling(args.lr, args.lr_batch))
    results = [type(r)(r.bench, r.name, dict(r.metrics, efficient=r.metrics["efficiency"] >= args.min_efficiency))
               for r in results]
    best = predictions.best_results(results, args.min_efficiency)
    show(args, ctxs, results, best, Inputs(spec, step, intra, inter, nbytes, keys, fusion))
    return 0


def horovod_settings(args):
    """Horovod's fusion threshold and cycle time as --fusion-threshold-mb and --cycle-time-ms give them."""
    from .scaling.model import HorovodSettings
    return HorovodSettings(int(args.fusion_threshold_mb * 2 ** 20), args.cycle_time_ms / 1e3)


def links(args):
    """(the link within a machine, the link between machines) that --link, --network and
    --network-GBps name, and the checks of --servers against them; bad input: UserError."""
    from .scaling import model as scaling_model
    intra = scaling_model.link(args.link)
    if intra.scope != "machine":
        raise UserError("--link %s is a network; give the link between devices of a machine (pcie3, pcie4, "
                        "nvlink) and the network with --network" % args.link)
    inter = (scaling_model.measured_link(args.network_GBps, scaling_model.LINKS["25gbe"].latency_s,
                                         name="%g GB/s" % args.network_GBps, scope="network")
             if args.network_GBps else scaling_model.link(args.network))
    if inter.scope != "network":
        raise UserError("--network %s links devices of one machine; give 10gbe, 25gbe or 100gbe" % args.network)
    if args.servers and args.engine == "horovod":
        raise UserError("--servers applies to the parameter server (--engine ps); Horovod has no servers")
    if args.servers and args.placement == "colocated" and args.servers > min(args.machines):
        raise UserError("--servers %d colocated on %d machine(s): at most one server per machine; lower "
                        "--servers or use --placement dedicated" % (args.servers, min(args.machines)))
    return intra, inter


def measured_step(args, spec, ctxs):
    """The per-device step of the model `spec` the prediction starts from: from --scaling's
    records, --t1 (and --update, --cpu), or measured now (--measure) on the first context."""
    from .scaling import parts
    if args.scaling:
        step = parts.step_from_scaling(parts.read_records(args.scaling, "scaling"))
        if step["model"] and step["model"] != spec.text:
            cli.note("note: %s was measured with --model %s; predicting for --model %s"
                     % (args.scaling, label(step["model"]), spec.label))
    elif args.t1 is not None:
        step = dict(t1_s=args.t1, update_s=args.update, per_device_batch=args.per_device_batch)
    else:
        from .training.loop import TrainConfig
        cli.advise(ctxs[:1], THREADS_NOTE)
        batch = args.per_device_batch or 32
        config = TrainConfig(model=spec, dataset="synthetic", batch_size=batch, limit=batch, steps=10,
                             optimizer=args.optimizer)
        with cli.progress_bar(10, "measure"):
            step = parts.measure_step(config, ctxs[0], steps=10)
    if args.t1 is not None:
        step["cpu_s"] = args.cpu
    if args.cores and step.get("cpu_s") is None:
        raise UserError("--cores needs the worker's CPU time per step: give --cpu SEC with --t1, or a --scaling "
                        "file written by this version of gluonperf (its rows carry cpu_s), or --measure")
    return step


@dataclass(frozen=True)
class Inputs:
    """What the predictions start from, as their table's title says it: the model (its ModelSpec),
    its per-device step (`measured_step`), the links within and between machines (`links`), its
    gradients (bytes, arrays) and Horovod's fusion buffer (bytes; 0: off)."""
    spec: object
    step: dict
    intra: object
    inter: object
    nbytes: int
    keys: int
    fusion: int


def show(args, ctxs, results, best, inputs):
    """The predictions' table (and --json / --csv, with the 'largest N' records), then the
    table of the most devices per machine that keep --min-efficiency."""
    from .scaling import model as scaling_model
    step, intra, inter, nbytes, keys, fusion = (inputs.step, inputs.intra, inputs.inter, inputs.nbytes, inputs.keys,
                                                inputs.fusion)
    m = results[0].metrics
    if args.engine == "horovod":
        scheme = ("Horovod, one process per device: one ring over all devices, %s (%.4g GB/s) within a machine, "
                  "%s (%.4g GB/s) across; cycle %g ms, %s: `buffers`: allreduces a step, one per cycle over "
                  "backward (2/3 of t1), at most one per array" % (intra.name, intra.GBps, inter.name, inter.GBps, args.cycle_time_ms,
                                            "fusion buffer %g MiB" % args.fusion_threshold_mb if fusion
                                            else "fusion off"))
    else:
        scheme = ("within a machine: ring over %s (%.4g GB/s); across machines: dist_sync over %s (%.4g GB/s), "
                  "%s (%s)" % (intra.name, intra.GBps, inter.name, inter.GBps,
                               "%d servers" % args.servers if args.servers else "one server per machine",
                               args.placement))
    columns = COLUMNS + ["buffers"] if args.engine == "horovod" else COLUMNS
    cli.emit(results, args, ctxs, columns=columns, records=results + best,
             title="%s: %.1f MiB of gradients in %d arrays, %d images per device, t1 %.4g ms, update %.4g ms; "
                   "%s; %s%s; lr %g per %d images, scaled linearly with %d warm-up epochs"
                   % (inputs.spec.label, nbytes / 2 ** 20, keys, m["per_device_batch"], 1e3 * step["t1_s"]
                      * m["per_device_batch"] / step["per_device_batch"], 1e3 * step["update_s"]
                      * m["per_device_batch"] / step["per_device_batch"], scheme,
                      "overlap assumed: step = max(t1,t2) + update" if args.overlap == "yes"
                      else "no overlap: step = t1 + t2 + update",
                      "; %d cores a machine, shared: t1 at least the devices' worker CPU time (%.4g ms each) over "
                      "them" % (args.cores, 1e3 * m["worker_cpu_s"]) if args.cores else "", args.lr, args.lr_batch,
                      scaling_model.WARMUP_EPOCHS))
    print()
    cli.print_table(best, args, columns=BEST_COLUMNS,
                    title="most devices per machine with efficiency >= %g (comm_bound: t2 > t1; "
                          "global batches above %d lose accuracy even with warm-up, Goyal et al. 2017)"
                          % (args.min_efficiency, scaling_model.LARGEST_SAFE_BATCH))


if __name__ == "__main__":
    cli.run(main, PROG)
