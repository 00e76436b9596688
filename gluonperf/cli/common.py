"""What every gluonperf command line shares: its model resolved and its outputs checked before
any work, the output (`emit`, the tables, --json and --csv, what a stopped command keeps, the
progress bar), the notes on stderr, and error handling (`run`, `guard_command`). The shared
flags and argument types (`cli.shared_flags`) and the settings made before MXNet loads
(`cli.defaults`) are imported here from their modules, so that a command needs only
`from .cli import common as cli`.

CLIs parse arguments, call an experiment, and hand its records here; they never
compute. Bad input is one line on stderr and a non-zero exit, never a traceback.
"""
import argparse
import atexit
import errno
import os
import sys
import time

from tqdm import tqdm

from .. import UserError, error_line
from ..runtime import guard, outputs
from ..records import format_table, write_csv, write_jsonl
# What runs while the stall guard watches stays in this module, whose frames the guard leaves out
# when it says where the main thread waits (runtime.guard.where_main_waits); what runs before it
# starts (parsing, the settings made before MXNet loads) is in the modules imported here.
from .shared_flags import (MODEL_HELP, add_model_flags, add_stall_timeout, add_threshold, add_wide,  # noqa: F401
                           checked, comma_list, common_parser, momentum, non_negative_float, non_negative_int,
                           non_negative_int_list, parse_threshold, percentage, positive_float, positive_int,
                           positive_int_list, tcp_port)
from .defaults import allocator_defaults, asks_help, dtype_defaults, subcommand_in_argv, thread_defaults  # noqa: F401

# MXNet is imported where it is needed, not here: the launcher uses this module
# without loading MXNet (importing it with a DMLC_ROLE set would start a server).


def print_table(results, args, columns=None, title=None, out=None):
    """Print the table of `results` (stdout): fitted to the terminal, every column with --wide;
    the columns it left out named in a note under it (stderr, so stdout stays the table)."""
    left = []
    print(format_table(results, columns=columns, title=title, wide=bool(getattr(args, "wide", False)),
                       left_out=left.append), file=out or sys.stdout)
    if left:
        (out or sys.stdout).flush()
        say("note: " + left[0])


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


def print_models():
    """--list-models: the names --model accepts, one a line with its description."""
    from ..training.models import list_models
    for name, description in list_models().items():
        print("%-28s %s" % (name, description))


def resolve_model(args, classes=10):
    """Check the model the flags describe, before any work (its factory imports and returns a
    Block, its first forward takes the input, the loss takes its output), and return its
    ModelSpec: the object every later step in this process takes (its `text` goes into records
    and the command lines of child processes; `args` stays as parsed). Notes go to stderr. Bad
    input: UserError, one line."""
    from ..training.model_spec import parse_model_args, parse_shape
    from ..training.models import resolve_spec
    try:
        spec, notes = resolve_spec(args.model, parse_model_args(getattr(args, "model_args", None)),
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
    return spec


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

    seconds = False  # counts expected seconds of work, not steps (progress_bar's `seconds`)
    EVERY = 60.0     # with `seconds` and no bar shown (stderr not a terminal): a line of the time left this often
    _said = None
    _began = 0.0
    label = "running"  # the desc, kept: a disabled tqdm keeps none

    def update(self, n=1):
        self.done += n
        desc = getattr(self, "desc", "") or "running"
        if self.seconds:
            guard.beat("%s (%.0f s of about %.0f s of work done)" % (desc, self.done, getattr(self, "total", 0) or 0))
            self._say_left()
        else:
            guard.beat("%s (step %d of %s)" % (desc, self.done + 1, getattr(self, "total", None) or "?"))
        return super().update(n)

    def reset(self, total=None):
        self.done = 0
        return super().reset(total=total)

    def _say_left(self):
        """Where no bar is shown, the time left as a line every EVERY seconds: the expected
        seconds left, scaled by how long the work so far took against its expectation."""
        now = _now()
        self._said = self._said or self._began
        if not self.disable or now - self._said < self.EVERY or self.done <= 0:
            return
        self._said = now
        gone = now - self._began
        left = max(0.0, (getattr(self, "total", 0) or 0) - self.done) * gone / self.done
        say("%s: %s gone, about %s left" % (self.label, _clock(gone), _clock(left)))

    def replan(self, left):
        """The work can now take at most `left` more steps: the total is what is done plus that."""
        self.total = self.done + left
        self.refresh()


_now = time.monotonic  # the clock of the time-left lines (a test gives its own)
# a bar of expected seconds: the time gone and left, not the seconds counted
SECONDS_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {elapsed} gone, about {remaining} left"


def progress_bar(total, desc, seconds=False):
    """A tqdm bar on a terminal, silent when stderr is piped or redirected; every update
    is progress for the stall guard (`guard_command`). The work starts: held-back notes
    come out first. `seconds`: `total` and the updates are the seconds the work is expected
    to take, and the bar shows the time left: what is left of the expectation, scaled by how
    long the work so far took against it (tqdm's average rate, smoothing 0)."""
    flush_notes()
    guard.beat("%s (starting)" % desc)
    if not seconds:
        return _GuardedBar(total=total, desc=desc, leave=False, disable=not sys.stderr.isatty())
    bar = _GuardedBar(total=total, desc=desc, leave=False, disable=not sys.stderr.isatty(), smoothing=0,
                      bar_format=SECONDS_FORMAT)
    bar.seconds, bar._began, bar.label = True, _now(), desc
    return bar


def _clock(seconds):
    """'42 s', '7 min 5 s', '1 h 20 min': a time left for a person."""
    seconds = int(round(seconds))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %d s" % divmod(seconds, 60) if seconds < 600 else "%d min" % round(seconds / 60)
    return "%d h %d min" % divmod(int(round(seconds / 60)), 60)


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


def _quiet_mxnet_shutdown(base):
    """After an MXNet error has been reported: MXNet's exit hook raises again what another
    context's operator failed with (its engine keeps that error), and Python prints the
    traceback. The hook still runs, with its error dropped: the one line has said it. The engine
    is drained first (each wait raises what is left, up to a few times), so that no failing
    operator is still in flight when MXNet tears down: MXNet 1.9.1 once aborted at exit ("double
    free or corruption") after two contexts' errors."""
    import mxnet as mx
    for _ in range(4):
        try:
            mx.nd.waitall()
            break
        except base.MXNetError:
            continue
    atexit.unregister(base._notify_shutdown)

    def notify_shutdown():
        try:
            base._notify_shutdown()
        except base.MXNetError:
            pass
    atexit.register(notify_shutdown)


def run(main, prog, argv=None, mxnet=True):
    """Run `main(argv)`, turning bad input and MXNet errors into one line and an exit code.

    MXNet is not imported here (compare and the launcher run without it); an MXNet
    error can only come from a command that loaded MXNet. A command that loads it (`mxnet`),
    or runs what does, is refused first when a variable MXNet reads would make it abort."""
    global _AS_COMMAND
    _AS_COMMAND = True
    usage_error = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = _one_line_error  # every parser the command builds
    try:
        if mxnet and not asks_help(sys.argv[1:] if argv is None else argv):
            from ..runtime.threads import unreadable_setting
            unreadable = unreadable_setting()
            if unreadable:
                raise UserError(unreadable)
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
