"""python -m gluonperf.profile: where a training step's time goes, held against this machine's ceiling.

Parses and checks the flags (the training-configuration flags are gluonperf.train's own),
then calls, in order: `ceiling.measure_ceiling` (peak FLOP/s), `step_profile.model_flops`
(the model's work), `step_profile.breakdown` (fenced parts and the unfenced step, no
profiler), `step_time.setup_blocks` (each of the model's Blocks timed alone, down to
--depth), and `step_profile.operator_table` in a fresh process of this command started
with MXNET_EXEC_BULK_EXEC_TRAIN=0 (the variable is read once, when MXNet loads, and the
profiler can be configured once per process); then `step_profile.verdict`. The tables say
which figures came from which run. Nothing is computed here.
"""
import argparse
import os
import subprocess
import sys
from types import SimpleNamespace

from . import UserError
from .cli import common as cli

# As a command, choose MXNet's thread count before MXNet is loaded (by `main`, after parsing);
# the operator-table run also turns bulk execution off, which is read only at that moment.
# `-- COMMAND` (a script of one's own, gluonperf.cli.profile_script) leaves the environment as the user has it.
OWN_SETTINGS = __name__ == "__main__" and "--" not in sys.argv[1:]
THREADS_NOTE = cli.thread_defaults(sys.argv[1:]) if OWN_SETTINGS else None
# --dtype bfloat16: the AMX permission (per process, so the operator-table child asks again)
DTYPE_NOTE = cli.dtype_defaults(sys.argv[1:]) if OWN_SETTINGS else None
if __name__ == "__main__" and "--operators-only" in sys.argv[1:]:
    os.environ["MXNET_EXEC_BULK_EXEC_TRAIN"] = "0"

from .cli.training_flags import add_training_flags  # noqa: E402
from .measure.profile_columns import BLOCK_COLUMNS, OPERATOR_COLUMNS, TOP_OPERATORS  # noqa: E402

PROG = "python -m gluonperf.profile"
FLAGS = ("model", "list_models", "hybridize", "dataset", "data_dir", "limit", "workers", "loader", "bad_images",
         "batch_size", "lr",
         "optimizer", "momentum", "wd", "beta1", "beta2", "epsilon", "kvstore", "seed", "dtype")
CEILING_COLUMNS = ["kernel", "shape", "gflop_per_s", "median_gflop_per_s", "before_gflop_per_s",
                   "after_gflop_per_s", "ceiling"]
WORK_COLUMNS = ["op", "layers", "forward_gflop", "backward_gflop", "training_gflop", "ceiling_images_per_s"]
BREAKDOWN_COLUMNS = ["part", "time_s", "share", "iqr_s", "images_per_s"]
VERDICT_COLUMNS = ["name", "finding"]


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG, parents=[cli.common_parser()],
        description="Where a training step's time goes, against this machine's ceiling: the peak FLOP/s "
                    "(float32, or bfloat16 with --dtype bfloat16) measured now, the model's FLOPs per training image, the step split into its "
                    "parts (each fenced by a sync), MXNet's profiler per operator, and a verdict. The "
                    "training configuration flags are gluonperf.train's. A training script of one's own, "
                    "unmodified: python -m gluonperf.profile [--steps N] [--warmup K] -- python train.py "
                    "(its flags: python -m gluonperf.profile --help --).")
    add_training_flags(p, FLAGS, defaults={"dataset": "synthetic"})
    p.add_argument("--steps", type=cli.positive_int, default=10,
                   help="measured steps: fenced, unfenced and profiled, each; and rounds of the Blocks table "
                        "(default: %(default)s)")
    p.add_argument("--depth", type=cli.non_negative_int, default=2,
                   help="the Blocks table: the model's Blocks down to this depth of its tree, each timed alone "
                        "(forward, backward, share of the step, GFLOP/s against the ceiling); 0 leaves the table "
                        "out (default: %(default)s)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=3,
                   help="untimed steps before each measurement (default: %(default)s)")
    p.add_argument("--ceiling", choices=["full", "quick"], default="full",
                   help="problem sizes of the peak measurement: full (1536^3 matrix product, 32x128x28x28 and "
                        "128x256x7x7 convolutions) or quick (small, for smoke tests; a rougher peak) (default: %(default)s)")
    p.add_argument("--trace", metavar="PATH",
                   help="keep the Chrome trace of the profiled steps (open in ui.perfetto.dev or chrome://tracing)")
    p.add_argument("--plot", metavar="PNG",
                   help="draw the step breakdown as a stacked bar and the top operators' GFLOP/s against the "
                        "ceiling")
    p.add_argument("--input-only", action="store_true",
                   help="with --dataset PATH (image data): answer only whether the step waits for its input "
                        "(the input section), without the ceiling, breakdown and operator runs")
    p.add_argument("--rounds", type=cli.positive_int, default=5,
                   help="with --dataset PATH: alternating rounds of --steps steps on the real loader, on a batch in "
                        "memory and of the loader alone, for the input verdict's interval (default: %(default)s)")
    cli.add_threshold(p)  # the input verdict's (with --dataset PATH)
    p.add_argument("--operators-only", action="store_true", help=argparse.SUPPRESS)
    return p


def check(args, ctxs):
    """Refuse bad input before any long work starts; the run's TrainConfig (its model the
    ModelSpec, its kvstore the one `check_kvstore` chose)."""
    from .experiments.step_time import check_config
    from .cli.training_flags import check_kvstore, check_optimizer_flags, config_from
    kvstore = check_kvstore(args, ctxs)
    check_optimizer_flags(args)
    from .training.data import classes
    # unknown names and models that do not run fail here; the spec is parsed once, here
    spec = cli.resolve_model(args, classes(args.dataset))
    config = config_from(args, ctxs, spec, kvstore)
    check_config(config, ctxs)
    cli.check_outputs(args)
    cli.check_output_path(args.plot, "--plot")
    cli.check_output_path(args.trace, "--trace")
    from .training.data import check_available
    check_available(args.dataset, args.data_dir, spec, args.loader)
    return config


def child_argv(args, config, out, trace):
    """The command line of the operator-table run: the parsed training configuration (the model as
    the spec's text, the kvstore `config` has), the contexts and the step counts of this one (not
    its outputs), with --operators-only."""
    from .training.model_spec import text_of
    chosen = {"model": text_of(config.model), "kvstore": config.kvstore}
    kept = []
    for dest in ("ctx",) + FLAGS + ("steps", "warmup", "stall_timeout"):
        value = chosen[dest] if dest in chosen else getattr(args, dest, None)
        if value is None or isinstance(value, bool):
            continue
        kept += ["--" + dest.replace("_", "-"), str(value)]
    kept += ["--json", out]
    if trace:
        kept += ["--trace", os.path.abspath(trace)]
    return kept + ["--operators-only"]


def operators_in_fresh_process(args, config, trace, desc="operators (fresh process)"):
    """Run this command with --operators-only in a fresh process with bulk execution off;
    return its operator records. The child has its own stall guard (same --stall-timeout);
    while it runs, this process reports progress to its own."""
    from .runtime import guard
    from .records import read_jsonl
    with guard.temp_dir(prefix="gluonperf-profile-") as tmp:
        out = os.path.join(tmp, "operators.jsonl")
        env = dict(guard.package_env(), MXNET_EXEC_BULK_EXEC_TRAIN="0")
        proc = guard.popen([sys.executable, "-m", "gluonperf.profile"] + child_argv(args, config, out, trace),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        with cli.progress_bar(None, desc) as bar:
            while True:
                try:
                    _, err = proc.communicate(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    bar.update(0)
        if proc.returncode == guard.STALL_EXIT:  # the child's stall guard stopped it: say so, exit alike
            cli.note("%s: the operator-table run (a fresh process) %s" % (PROG, guard.last_line(err, "stalled")))
            raise SystemExit(guard.STALL_EXIT)
        if proc.returncode != 0 or not os.path.exists(out):
            raise UserError("the operator-table run (a fresh process) failed with exit code %s: %s"
                            % (proc.returncode, guard.last_line(err, "no message")))
        return [r for r, _ in read_jsonl(out)]


INPUT_COLUMNS = ["name", "time_s", "images_per_s", "images_per_s_ci_low", "images_per_s_ci_high", "wait_share",
                 "share", "share_ci_low", "share_ci_high", "verdict"]


def input_title(args, config, ctxs):
    """The input section's title; --workers as the run used it: when not given, the default
    `config_from` chose (0 on CPU contexts, TrainConfig's with GPUs), said to be that."""
    from .runtime.contexts import describe
    workers = "%d" % config.workers
    if args.workers is None:
        cpus = all(c.device_type == "cpu" for c in ctxs)
        workers += " (the default %s)" % ("on CPU contexts" if cpus else "with GPUs")
    return ("input: is the step waiting for its input? %s on %s, batch %d on %s, --loader %s, --workers %s; %d "
            "alternating rounds of %d steps as gluonperf.train runs them on the real loader and on one batch in "
            "memory, and of the loader alone; share waiting = 1 - t(memory)/t(real) per round (95%% t interval on "
            "its log); wait_share: time blocked in next()" % (
                config.model.label, args.dataset, args.batch_size, describe(ctxs), args.loader, workers, args.rounds,
                args.steps))


def input_section(args, config, ctxs, setup):
    """The input-bound rows (gluonperf.experiments.input_pipeline.input_bound) on the loader `setup` holds."""
    from .experiments.input_pipeline import input_bound
    with cli.progress_bar(2 * args.warmup + 3 * args.rounds, "input") as bar:
        return input_bound(config, ctxs, args.steps, args.rounds, args.warmup, args.threshold, progress=bar.update,
                           setup=setup)


def blocks_section(args, setup):
    """The Blocks rows (gluonperf.experiments.step_time.setup_blocks) of the model `setup` holds."""
    from .experiments.step_time import setup_blocks
    from .measure.blocks import regions
    with cli.progress_bar(regions(setup.net, args.depth) * args.steps, "blocks") as bar:
        return setup_blocks(setup, args.depth, repeat=args.steps, warmup=max(1, args.warmup), progress=bar.update)


def blocks_title(args, config, ctxs, blocks):
    """The Blocks section's title: what was timed how, and the check's finding."""
    m = blocks[0].metrics
    check = blocks[-1].metrics
    return ("Blocks [run 1: this process, each Block timed alone on the inputs it gets in the model]: %s down to "
            "depth %d, batch %d on %s%s; %d interleaved rounds (median): forward under autograd.record, backward = "
            "(forward + backward) - forward; step_share of the step's forward + loss + backward; %s. %s%s"
            % (config.model.label, args.depth, m["batch_size"], m["ctx"],
               " (the first context's part of the batch)" if len(ctxs) > 1 else "", m["rounds"],
               check["finding"], m["caveat"][0].upper() + m["caveat"][1:],
               ". " + m["model_note"][0].upper() + m["model_note"][1:] if m.get("model_note") else ""))


def breakdown_section(args, config, ctxs, setup):
    """The step breakdown's records (gluonperf.experiments.step_time.breakdown), and the growth of
    memory over its steps (measure.growth: sampled at every step; its warm-up, 2 x --warmup steps)."""
    from .experiments.step_time import breakdown
    from .measure.growth import records_of
    from .measure.memory import StepMemory
    from .runtime.contexts import describe
    memory = StepMemory(ctxs)
    with cli.progress_bar(2 * (args.warmup + args.steps), "breakdown") as bar:
        parts = breakdown(config, ctxs, args.steps, args.warmup, setup=setup,
                          progress=lambda: (bar.update(), memory.sample(memory.steps + 1)))
    return parts, records_of(memory.plain(), 2 * args.warmup, command="profile", model=config.model.text,
                             batch_size=args.batch_size, contexts=describe(ctxs))


def operators_only(args, ctxs, config):
    """The child's part: the operator table in this (fresh, bulk-off) process."""
    from .experiments.step_time import operator_table
    with cli.progress_bar(args.warmup + args.steps, "operators") as bar:
        results = operator_table(config, ctxs, args.steps, args.warmup, args.trace, progress=bar.update)
    cli.emit(results, args, ctxs, columns=["op", "phase", "calls_per_step", "time_s", "share"],
             title="operators (profiled run)")
    return 0


def main(argv=None):
    if "--" in (sys.argv[1:] if argv is None else argv):  # -- python train.py: a script of one's own
        from .cli.profile_script import main as profile_script
        return profile_script(argv)
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if args.list_models:
        cli.print_models()
        return 0
    from .cli.training_flags import note_optimizer
    ctxs = cli.contexts(args)
    config = check(args, ctxs)
    if args.operators_only:
        return operators_only(args, ctxs, config)
    from .training.image_data import is_path
    if args.input_only and not is_path(args.dataset):
        raise UserError("--input-only asks whether the step waits for image data: give --dataset PATH (a folder or "
                        "a .rec)")
    cli.advise(ctxs, THREADS_NOTE)
    note_optimizer(args, ctxs)
    if DTYPE_NOTE and args.dtype == "bfloat16":
        cli.note_later("note: " + DTYPE_NOTE)
    if args.input_only:
        from .experiments.step_time import prepare
        rows = input_section(args, config, ctxs, prepare(config, ctxs))
        cli.emit(rows, args, ctxs, columns=INPUT_COLUMNS, title=input_title(args, config, ctxs))
        print(rows[-1].metrics["finding"])
        return 0
    runs = measure(args, config, ctxs)
    cli.emit_sections(sections(args, config, ctxs, runs), args, ctxs,
                      records=runs.ceiling + runs.works + runs.parts + runs.blocks + runs.operators + runs.found
                      + runs.inputs + runs.growth)
    if runs.inputs:
        print(runs.inputs[-1].metrics["finding"])
    for r in runs.growth:  # memory over the breakdown's steps (measure.growth)
        print(r.metrics["finding"])
    step = runs.step
    if step["noisy"]:
        cli.note("note: the fenced steps are noisy (IQR %.0f%% of the median): other work competes for the "
                 "cores; raise --steps or run on a quieter machine" % (100 * step["iqr_s"] / step["time_s"]))
    if args.trace:
        cli.note("wrote profiler trace %s (the profiled steps of run 2; open in ui.perfetto.dev)" % args.trace)
    if args.plot:
        from .render.plots import plot_step_breakdown
        plot_step_breakdown(runs.parts, runs.operators, runs.peak, args.plot, where(args, config, ctxs))
    return 0


def measure(args, config, ctxs):
    """Every measurement, in order: the model's FLOPs, the ceiling (before and after run 1), run 1
    (the breakdown, the input section with image data, the Blocks), run 2 (the operators, a fresh
    process) and the verdict; their records, by part."""
    from .experiments.step_time import model_flops, prepare, verdict, work
    from .measure.ceiling import best_of, ceiling_devices, ceiling_flops, measure_ceiling
    from .measure.operators import with_ceiling
    from .training.data import sample_shape
    from .training.image_data import is_path
    runs = SimpleNamespace(flops=model_flops(config, ctxs))
    setup = prepare(config, ctxs)  # data, model and trainer: bad data settings fail before any timing
    with cli.progress_bar(3 * 5, "ceiling") as bar:
        start = measure_ceiling(ctxs[0], args.ceiling, progress=bar.update, dtype=args.dtype)
    runs.parts, runs.growth = breakdown_section(args, config, ctxs, setup)
    runs.inputs = input_section(args, config, ctxs, setup) if is_path(args.dataset) else []
    runs.blocks = blocks_section(args, setup) if args.depth else []
    del setup
    with cli.progress_bar(3 * 5, "ceiling again") as bar:  # a busy spell may have hidden the peak before
        runs.ceiling = best_of([start, measure_ceiling(ctxs[0], args.ceiling, progress=bar.update,
                                                       dtype=args.dtype)], ("before", "after"))
    runs.peak = ceiling_flops(runs.ceiling) * ceiling_devices(ctxs)
    runs.operators = with_ceiling(operators_in_fresh_process(args, config, args.trace), runs.peak)
    if runs.blocks:
        from .measure.blocks import with_ceiling as blocks_with_ceiling
        runs.blocks = blocks_with_ceiling(runs.blocks, ceiling_flops(runs.ceiling))  # timed on the first context
    runs.found = verdict(runs.flops, runs.ceiling, runs.parts, runs.operators, ctxs)
    runs.shape = sample_shape(args.dataset, config.model)
    runs.works = work(runs.flops, config.model.text, runs.shape, runs.ceiling, ctxs)
    runs.step = next(r for r in runs.parts if r.name == "fenced step").metrics
    return runs


def where(args, config, ctxs):
    """What ran: the model, the batch, the contexts and the settings, for titles."""
    from .runtime.contexts import describe
    from .runtime.precision import precision_label
    return "%s, batch %d on %s, hybridize %s, kvstore %s, %s data%s" % (
        config.model.label, args.batch_size, describe(ctxs), args.hybridize, config.kvstore, args.dataset,
        precision_label(args.dtype))


def sections(args, config, ctxs, runs):
    """(title, records, columns) of each table, in the order they are printed."""
    from .experiments.step_time import BULK_VARIABLE, gap_row
    from .measure.ceiling import ceiling_devices
    profiled = next(r for r in runs.operators if r.name == "profiled step")
    summary, step, flops = profiled.metrics, runs.step, runs.flops
    table = [r for r in runs.operators if r.name != "profiled step"][:TOP_OPERATORS] + [gap_row(profiled)]
    threads = runs.ceiling[0].metrics["omp_threads"]
    out = [
        ("ceiling: peak %s GFLOP/s on %s with %d OpenMP thread(s) per operator: fastest of %d repeats, "
         "measured before and after run 1, the higher counts (its median beside it)%s"
         % (args.dtype, ctxs[0], threads, runs.ceiling[0].metrics["repeats"],
                                  "; x%d contexts' worth" % ceiling_devices(ctxs) if ceiling_devices(ctxs) > 1 else ""),
         runs.ceiling, CEILING_COLUMNS),
        ("work: GFLOP per training image of %s, input %s (1 multiply-add = 2 FLOPs; backward = 2x forward "
         "for layers with weights)%s" % (config.model.label, "x".join(map(str, runs.shape)),
                                         "; not counted: " + ", ".join(flops.uncounted) if flops and flops.uncounted
                                         else ""),
         runs.works, WORK_COLUMNS),
        ("step breakdown [run 1: this process, no profiler, bulk execution as in training]: %s; %d fenced "
         "steps (a sync after each part; mean of the middle %d by step time) and %d unfenced steps as "
         "gluonperf.train runs them (median of %d rounds)"
         % (where(args, config, ctxs), args.steps, step["typical_steps"], args.steps,
            next(r for r in runs.parts if r.name == "unfenced step").metrics["repeats"]), runs.parts,
         BREAKDOWN_COLUMNS),
        ("operators [run 2: a fresh process, %s=%s, MXNet profiler on]: per step of %d steps as gluonperf.train "
         "runs them; profiled step %.4g ms (run 1 fenced: %.4g ms); operators sum to %.0f%% of it, some operator "
         "runs %.0f%%; top %d of %d" % (BULK_VARIABLE, summary["bulk_exec_train"], args.steps, 1e3 * summary["step_s"],
                                        1e3 * step["time_s"], 100 * summary["operator_share"],
                                        100 * summary["busy_share"], min(TOP_OPERATORS, len(runs.operators) - 1),
                                        len(runs.operators) - 1),
         table, OPERATOR_COLUMNS),
        ("verdict (achieved: run 1; losses: run 2, ranked by time beyond what their FLOPs need at the ceiling)",
         runs.found, VERDICT_COLUMNS),
    ]
    if runs.blocks:
        out.insert(3, (blocks_title(args, config, ctxs, runs.blocks), runs.blocks, BLOCK_COLUMNS))
    if flops is None:  # a model that cannot be hybridized: its FLOPs are not known (the verdict says so)
        out = [section for section in out if section[1] is not runs.works]
    if runs.inputs:
        out.append((input_title(args, config, ctxs), runs.inputs, INPUT_COLUMNS))
    return out


if __name__ == "__main__":
    cli.run(main, PROG)
