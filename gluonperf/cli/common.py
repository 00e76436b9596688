"""What every gluonperf command line shares: common flags, error handling, output.

CLIs parse arguments, call an experiment, and hand its records here; they never
compute. Bad input is one line on stderr and a non-zero exit, never a traceback.
"""
import argparse
import atexit
import errno
import math
import os
import sys

from tqdm import tqdm

from .. import UserError, error_line
from ..runtime import guard, outputs
from ..records import format_table, write_csv, write_jsonl

# MXNet is imported where it is needed, not here: the launcher uses this module
# without loading MXNet (importing it with a DMLC_ROLE set would start a server).


def common_parser(ctx_default="cpu"):
    """Flags shared by every subcommand: --ctx, --json, --csv, --wide."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--ctx", default=ctx_default,
                   help="contexts: cpu, cpu0,cpu1, gpu (all GPUs), gpu0,gpu1 or gpu:0 (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON lines, with the environment")
    p.add_argument("--csv", metavar="PATH", help="also write the results as CSV")
    add_wide(p)
    add_stall_timeout(p)
    return p


def add_wide(p):
    """--wide: the tables with every column under its recorded name, each cell with its unit,
    however wide (by default a table fits the terminal, each column's unit once in its header:
    records.format_table)."""
    p.add_argument("--wide", action="store_true",
                   help="print every column of the tables, however wide, under its recorded name, each cell with "
                        "its unit (median_s: 660.3 us) and each interval's ends apart (by default a table fits the "
                        "terminal: COLUMNS, or 100 columns under a pipe, and says a column's unit once, in its "
                        "header: median (us): 660.3)")


def print_table(results, args, columns=None, title=None, out=None):
    """Print the table of `results` (stdout): fitted to the terminal, every column with --wide;
    the columns it left out named in a note under it (stderr, so stdout stays the table)."""
    left = []
    print(format_table(results, columns=columns, title=title, wide=bool(getattr(args, "wide", False)),
                       left_out=left.append), file=out or sys.stdout)
    if left:
        (out or sys.stdout).flush()
        say("note: " + left[0])


def add_stall_timeout(p):
    p.add_argument("--stall-timeout", type=non_negative_float, default=guard.DEFAULT_STALL_TIMEOUT, metavar="SEC",
                   help="stop with exit code 3 when a timed region or a step makes no progress for SEC "
                        "seconds, naming what it waited on (0: never; default: %(default)g)")


def percentage(text, upper=100, upper_included=False):
    """'5%', '5' -> 0.05 (an argparse type): from 0% up to `upper`%."""
    raw = text.strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a percentage; use e.g. 5%%" % text)
    if not (0 <= value <= upper if upper_included else 0 <= value < upper):
        raise argparse.ArgumentTypeError("%r must be between 0%% and %g%%%s" % (
            text, upper, "" if upper_included else " (not included)"))
    return value / 100.0


def parse_threshold(text):
    """'10%', '10' -> 0.10; '0.5%' -> 0.005 (0% to 1000%): compare's --fail-above, report's --threshold."""
    return percentage(text, upper=1000, upper_included=True)


def add_threshold(p, default=0.05):
    """--threshold: the change below which a ratio counts as 'the same' (stats.verdict)."""
    p.add_argument("--threshold", type=percentage, default=default, metavar="PCT",
                   help="a change within +-PCT is 'the same'; faster/slower needs the 95%% interval to exclude "
                        "1 and the estimate past PCT (default: " + "%g%%%%)" % (100 * default))


def guard_command(args, prog, stall_timeout=None):
    """For a long-running command, once its flags are parsed: start the stall guard
    (--stall-timeout) and stop children / remove temporary files on SIGINT, SIGTERM, SIGHUP.
    Only when run as a command (`run`): a library caller's process keeps its own handlers."""
    if not _AS_COMMAND:
        return
    guard.install_signal_handlers(prog)
    if stall_timeout is None:
        stall_timeout = getattr(args, "stall_timeout", guard.DEFAULT_STALL_TIMEOUT)
    guard.start_stall_guard(stall_timeout, prog)


def _checked(convert, what, ok, rule):
    """An argparse `type` that converts with `convert` and accepts values where `ok`."""
    def check(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not %s" % (text, what))
        if not ok(value):
            raise argparse.ArgumentTypeError("%r %s" % (text, rule))
        return value
    return check


positive_int = _checked(int, "a whole number", lambda v: v >= 1, "must be at least 1")
non_negative_int = _checked(int, "a whole number", lambda v: v >= 0, "must be 0 or more")
tcp_port = _checked(int, "a whole number", lambda v: 0 < v < 65536, "is not a TCP port (1 to 65535)")

positive_float = _checked(float, "a number", lambda v: math.isfinite(v) and v > 0, "must be above 0")
non_negative_float = _checked(float, "a number", lambda v: math.isfinite(v) and v >= 0, "must be 0 or more")
momentum = _checked(float, "a number", lambda v: 0 <= v < 1, "must be at least 0 and below 1 (e.g. 0.9)")


def comma_list(item, example):
    """An argparse type for whole numbers separated by commas, each read by `item` (an argparse
    type, whose error names the item that is wrong): '10, 100,1000' -> [10, 100, 1000]."""
    def parse(text):
        items = [t.strip() for t in text.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError("%r: give whole numbers separated by commas, e.g. %s" % (text, example))
        return [item(t) for t in items]
    return parse


positive_int_list = comma_list(positive_int, "10,100,1000")
non_negative_int_list = comma_list(non_negative_int, "0,2,4")


def print_models():
    """--list-models: the names --model accepts, one a line with its description."""
    from ..training.models import list_models
    for name, description in list_models().items():
        print("%-28s %s" % (name, description))


MODEL_HELP = ("resnet18 (the book's 28x28 ResNet-18), lenet, mlp, a GluonCV model-zoo name (see --list-models), "
              "or your own: package.module:factory or path/to/file.py:factory, a function that returns a "
              "gluon Block, with --input-shape (docs: Your own model)")


def add_model_flags(p, default, help=MODEL_HELP):
    """--model and what a model of one's own needs: its factory's arguments, one sample's shape
    and dtype, its loss. `resolve_model` reads them back, after parsing."""
    from ..training.model_spec import INPUT_DTYPES
    p.add_argument("--model", default=default, help="%s (default: %%(default)s)" % help)
    p.add_argument("--model-args", metavar="K=V,...", default=None,
                   help="keyword arguments for the model's factory: key=value,key=value (values read as JSON "
                        "where they parse) or a JSON object")
    p.add_argument("--input-shape", metavar="C,H,W", default=None, action="append",
                   help="the shape of one sample the model takes (no batch axis), e.g. 3,32,32; needed for "
                        "module:factory models (a built-in or zoo model has its own); once per input for a "
                        "model that takes several")
    p.add_argument("--input-dtype", choices=INPUT_DTYPES, default="float32",
                   help="float32 (images, features) or int32 (token ids for an Embedding; with --vocab-size) "
                        "(default: %(default)s)")
    p.add_argument("--vocab-size", type=positive_int, default=None, metavar="N",
                   help="with --input-dtype int32: token ids are drawn from 0..N-1")
    p.add_argument("--loss", metavar="MODULE:FACTORY", default=None,
                   help="a function returning the gluon Loss to train with, called loss(output, label) "
                        "(default: softmax cross-entropy over the classes)")


def resolve_model(args, classes=10):
    """Check the model the flags describe, before any work (its factory imports and returns a
    Block, its first forward takes the input, the loss takes its output), and put its spec in
    args.model: the text every later step and child process reads. Notes go to stderr.
    Bad input: UserError, one line."""
    from ..training.model_spec import parse_model_args, parse_shape
    from ..training.models import resolve_model as resolve
    try:
        args.model, notes = resolve(args.model, parse_model_args(getattr(args, "model_args", None)),
                                    [parse_shape(s) for s in args.input_shape] if getattr(args, "input_shape", None)
                                    else None,
                                    getattr(args, "input_dtype", "float32"), getattr(args, "vocab_size", None),
                                    getattr(args, "loss", None), classes)
    except UserError:
        raise
    except ValueError as e:
        raise UserError(str(e))
    for line in notes:
        note_later("note: " + line)
    return args.model


def contexts(args):
    from ..runtime.contexts import parse_contexts
    return parse_contexts(args.ctx)


def check_output_path(path, flag):
    """Refuse, before any work is done, an output file that cannot be written: a directory,
    a directory (or /proc) where no file can be made, a device without write permission
    (the rule of `runtime.outputs`, which writes it)."""
    if path is None:
        return
    problem = outputs.output_problem(path)
    if problem:
        raise UserError("%s %s %s" % (flag, path, problem))


def check_output_dir(path, flag):
    """Refuse an output directory that is a file or cannot be created, before any work is done."""
    if path is None:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError("%s %s is a file; give a directory" % (flag, path))
    problem = outputs.directory_problem(path)
    if problem:
        raise UserError("%s %s %s" % (flag, path, problem))


def check_memory(nbytes, what):
    """Refuse, before any work, a size whose arrays need more host memory than is available
    now: the alternative is swapping for minutes, then the kernel's OOM killer."""
    import psutil
    available = psutil.virtual_memory().available
    if nbytes > available:
        raise UserError("%s needs about %.1f GiB of memory, and this machine has %.1f GiB available; use a "
                        "smaller size" % (what, nbytes / 2 ** 30, available / 2 ** 30))


def check_outputs(args):
    check_output_path(getattr(args, "json", None), "--json")
    check_output_path(getattr(args, "csv", None), "--csv")


def write_outputs(records, args, ctxs=()):
    """Write `records` to the --json / --csv files the command was given (if any)."""
    if getattr(args, "json", None):
        from ..measure.harness import environment
        write_jsonl(records, args.json, environment(ctxs))
    if getattr(args, "csv", None):
        write_csv(records, args.csv)


def emit(results, args, ctxs=(), title=None, columns=None, out=None, records=None):
    """Write --json / --csv files, then print the table of `results`.

    `records` (default: `results`) is what the files get, when they hold more than the
    table shows. Files come first: a reader that stops early (| head) loses no result."""
    flush_notes()
    records, spread = _with_processes(results if records is None else records, args)
    write_outputs(records, args, ctxs)
    print_table(results, args, columns=columns, title=title, out=out)
    _print_spread(spread, out)


def _with_processes(records, args):
    """`records` and, with --processes N, the records of N-1 more fresh processes of this
    command (cli.processes), each marked with its `process`; and the spread lines to print."""
    from . import processes
    if not processes.wanted(args):
        return records, []
    with progress_bar(processes.wanted(args), "more processes") as bar:
        more = processes.more_processes(args, bar.update)
    for r in records:
        r.metrics["process"] = 1
    records = list(records) + more
    return records, processes.spread_lines(records)


def _print_spread(lines, out=None):
    if lines:
        print("\n".join(["process to process (--processes):"] + ["  " + l for l in lines]), file=out or sys.stdout)


def keep_on_stop(results, args, title, columns=None, ctxs=(), also=None):
    """A block inside which a signal or a stall does not lose what a long command has
    finished: `results()` (e.g. sweep.Sweeps.results; records of unfinished work marked
    `"partial": true`) goes to the --json / --csv files the command was given (and to
    `also(records)`, e.g. a plot), and its table to stdout. `title` may be a function of
    nothing, called then."""
    def keep():
        records = results()
        if not records:
            return None
        write_outputs(records, args, ctxs)
        if also:
            also(records)
        partial = sum(1 for r in records if r.metrics.get("partial"))
        print_table(records, args, columns=columns + ["partial"] if columns and partial else columns,
                    title="%s [stopped before the end: %d result(s)%s]"
                          % (title() if callable(title) else title, len(records),
                             ", %d cut short (partial)" % partial if partial else ""))
        sys.stdout.flush()
        files = [f for f in (getattr(args, "json", None), getattr(args, "csv", None)) if f]
        return "kept the %d results measured so far%s%s" % (
            len(records), " in " + " and ".join(files) if files else "",
            " (%d cut short: partial)" % partial if partial else "")
    return guard.on_stop(keep)


def emit_sections(sections, args, ctxs=(), records=None, out=None):
    """Like `emit`, for a command that prints several tables: write --json / --csv once
    (`records`, default every section's results), then print each (title, results,
    columns) section, separated by a blank line."""
    if records is None:
        records = [r for _, results, _ in sections for r in results]
    flush_notes()
    records, spread = _with_processes(records, args)
    write_outputs(records, args, ctxs)
    for number, (title, results, columns) in enumerate(sections):
        if number:
            print(file=out or sys.stdout)
        print_table(results, args, columns=columns, title=title, out=out)
    _print_spread(spread, out)


class _GuardedBar(tqdm):
    """A tqdm bar whose every update counts as progress for the stall guard."""

    done = 0  # counted here too: a disabled tqdm (stderr piped) does not count

    def update(self, n=1):
        self.done += n
        guard.beat("%s (step %d of %s)" % (getattr(self, "desc", "") or "running", self.done + 1,
                                          getattr(self, "total", None) or "?"))
        return super().update(n)

    def reset(self, total=None):
        self.done = 0
        return super().reset(total=total)

    def replan(self, left):
        """The work can now take at most `left` more steps: the total is what is done plus that."""
        self.total = self.done + left
        self.refresh()


def progress_bar(total, desc):
    """A tqdm bar on a terminal, silent when stderr is piped or redirected; every update
    is progress for the stall guard (`guard_command`). The work starts: held-back notes
    come out first."""
    flush_notes()
    guard.beat("%s (starting)" % desc)
    return _GuardedBar(total=total, desc=desc, leave=False, disable=not sys.stderr.isatty())


_LATER = []  # notes held back by note_later


def say(line):
    """One line on stderr, in one write: print() writes the text and its newline apart, and
    MXNet's engine threads, which log to stderr too (another context's failing operator),
    landed between the two and split the line."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def note(message):
    """A remark for the person at the terminal (stderr, so stdout stays the table); the
    notes held back by `note_later` come out first."""
    flush_notes()
    say(message)


def note_later(message):
    """A remark on the settings in force, shown once the command gets going (its first
    note, progress bar or table, or its end) and dropped if it stops on bad input first,
    so that an error stays one line."""
    _LATER.append(message)


def flush_notes():
    while _LATER:
        say(_LATER.pop(0))


def _asks_help(argv):
    """True for -h/--help: the command will only print its help, so nothing is set or sampled."""
    return any(a in ("-h", "--help") for a in argv)


def thread_defaults(argv, at_least=1):
    """For a command about to load MXNet: set OMP_NUM_THREADS to one thread per core,
    shared among the CPU contexts that run at once (those of --ctx, and at least
    `at_least`, or the processes of a Horovod job on this machine), unless the user set it. MXNet reads it once, when loaded, and by
    default gives each operator only half the processors.
    Returns the note to show, or None when nothing was changed."""
    if _asks_help(argv):
        return None
    from ..runtime.threads import apply_thread_defaults, cpu_contexts_in_argv, job_processes_here
    here = job_processes_here()
    if here > 1:  # a Horovod job's processes on this machine share its cores (one device each, of a
        # --ctx list with one per process); its siblings, starting now, are no other work to leave cores for
        named = cpu_contexts_in_argv(argv, at_least)
        return apply_thread_defaults(1 if named == here else named, taken=0, processes=here)
    return apply_thread_defaults(cpu_contexts_in_argv(argv, at_least))


def subcommand_in_argv(argv):
    """The subcommand of a command line (its first word that is not a flag), read before argparse."""
    return next((a for a in argv if not a.startswith("-")), None)


def allocator_defaults(argv, stand_in_commands):
    """For `python -m gluonperf.bench <command>` about to load MXNet: when the command is one
    of `stand_in_commands` (CPU contexts standing in for devices) and --ctx names no GPU,
    keep glibc from giving freed memory back (gluonperf.runtime.allocator). Returns the note to show,
    or None when nothing was changed."""
    if _asks_help(argv):
        return None
    from ..runtime.threads import ctx_in_argv
    if subcommand_in_argv(argv) not in stand_in_commands or "gpu" in ctx_in_argv(argv).lower():
        return None
    from ..runtime.allocator import keep_freed_memory
    return keep_freed_memory()


def dtype_defaults(argv):
    """For a command about to load MXNet with --dtype bfloat16: what gluonperf.runtime.precision.prepare
    sets (the AMX permission, oneDNN's instruction set). Returns the note to show, or None."""
    if _asks_help(argv):
        return None
    from ..runtime.precision import dtype_in_argv, prepare
    return prepare(dtype_in_argv(argv))


def advise(ctxs, threads_note=None, prefix=""):
    """Tell the user (stderr) about thread settings made for them, settings that leave
    much of the machine idle (with the fix), and a machine already busy."""
    from ..runtime.threads import idle_warnings, load_warning
    if threads_note:
        note_later("note: " + threads_note)
    for line in idle_warnings(ctxs):
        note_later("warning: " + prefix + line)
    from ..runtime.threads import job_processes_here
    busy = load_warning() if job_processes_here() == 1 else None  # a job's siblings are no "other" load
    if busy:
        note_later("note: " + busy)


_AS_COMMAND = False


def _one_line_error(parser, message):
    """argparse's error, without the usage block it prints first: one line, exit code 2."""
    parser.exit(2, "%s: error: %s (see --help)\n" % (parser.prog, message))


def worker_entry(worker, module, command, argv=None):
    """`python -m <module>` of a module that is only a command's worker process:
    `worker(argument)` when given the one JSON argument its command passes; otherwise one
    line naming the command to run instead, exit code 2 (not json's traceback)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].startswith("{"):
        print("python -m %s: error: this module is the worker process of %s; run that (see its --help)"
              % (module, command), file=sys.stderr)
        sys.exit(2)
    worker(argv[0])


def _quiet_mxnet_shutdown(base):
    """After an MXNet error has been reported: MXNet's exit hook raises again what another
    context's operator failed with (its engine keeps that error), and Python prints the
    traceback. The hook still runs, with its error dropped: the one line has said it."""
    atexit.unregister(base._notify_shutdown)

    def notify_shutdown():
        try:
            base._notify_shutdown()
        except base.MXNetError:
            pass
    atexit.register(notify_shutdown)


def run(main, prog, argv=None):
    """Run `main(argv)`, turning bad input and MXNet errors into one line and an exit code.

    MXNet is not imported here (compare and the launcher run without it); an MXNet
    error can only come from a command that loaded MXNet."""
    global _AS_COMMAND
    _AS_COMMAND = True
    usage_error = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = _one_line_error  # every parser the command builds
    try:
        code = main(argv)
        flush_notes()
    except UserError as e:
        _LATER.clear()  # the error is the one line: settings notes are moot
        say("%s: error: %s" % (prog, e))
        code = 2
    except KeyboardInterrupt:
        say("%s: interrupted" % prog)
        code = 130
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except outputs.OutputError as e:  # an output file: a full disk or device, a broken pipe, a vanished directory
        _LATER.clear()
        say("%s: error: cannot write %s: %s%s" % (
            prog, e.filename, e.strerror,
            "; free some space or write elsewhere" if e.errno in (errno.ENOSPC, errno.EDQUOT) else ""))
        code = 1
    except OSError as e:  # the disk filled up, or the file system turned read-only, after the checks
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO):
            raise
        _LATER.clear()
        say("%s: error: cannot write %s: %s; free some space or write elsewhere"
            % (prog, e.filename or "the output", e.strerror))
        code = 1
    except MemoryError as e:  # numpy's "Unable to allocate ..." (MXNet's own are MXNetErrors)
        _LATER.clear()
        say("%s: error: out of memory%s; use smaller sizes" % (prog, ": %s" % e if str(e) else ""))
        code = 1
    except Exception as e:
        base = sys.modules.get("mxnet.base")
        if base is None or not isinstance(e, base.MXNetError):
            raise
        _LATER.clear()
        line = error_line(e)
        if "allocate" in line.lower() and "memory" in line.lower():
            line += " (out of memory: use smaller sizes, e.g. a lower --batch-size)"
        say("%s: MXNet error: %s" % (prog, line))
        _quiet_mxnet_shutdown(base)
        code = 1
    finally:
        argparse.ArgumentParser.error = usage_error
        guard.stop_stall_guard()
        guard.cleanup()
    sys.exit(code or 0)
