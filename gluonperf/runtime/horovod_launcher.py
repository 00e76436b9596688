"""Horovod jobs (`train --kvstore horovod`): what `gluonperf.launch --engine horovod` runs.

Horovod's own launcher, horovodrun, starts the N processes (locally, or over ssh on the
hosts of a hostfile), gives them their ranks through Gloo's rendezvous and stops all of them
when one fails. This module plans it as one `ps_launcher.Node`, so that the job gets the same
timeout, Ctrl-C / SIGTERM handling and tear-down as a parameter-server job
(`ps_launcher.run`). horovodrun runs as `python -m gluonperf.runtime.horovod_launcher ARGS`
(`run_horovodrun`), which turns its Python traceback on a failed rank into one line and exits
with that rank's code. Output lines keep Horovod's own prefix, `[rank]<stdout>:`.

This module does not import mxnet or horovod: it only plans processes.
"""
import importlib.util
import re
import sys
from collections import Counter

from .. import UserError
from .ps_launcher import Node, local_thread_defaults
from .wire import LOCAL_WORKERS

INSTALL = "bash scripts/install-horovod (docs/engines.md)"


def available():
    """True when horovodrun and horovod.mxnet can be found by this Python (without importing them)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("horovod.runner.launch", "horovod.mxnet"))
    except ImportError:
        return False


def require(what):
    """UserError, one line saying how to install it, when `what` (e.g. '--engine horovod') needs
    Horovod and this Python cannot find it (`available`)."""
    if not available():
        raise UserError("%s needs Horovod built with MXNet support, which %s cannot import; install it with %s"
                        % (what, sys.executable, INSTALL))


def host_slots(num_workers, hosts):
    """horovodrun's -H: worker i on hosts[i % len(hosts)], as `name:slots,...` (the launcher's
    placement for the parameter server, kept here)."""
    counts = Counter(hosts[i % len(hosts)].address for i in range(num_workers))
    return ",".join("%s:%d" % (address, counts[address]) for address in dict.fromkeys(h.address for h in hosts)
                    if counts[address])


def plan(command, num_workers, hosts=None, python=sys.executable, taken=0):
    """The job as one Node: horovodrun -np N -H ... --gloo COMMAND. Without hosts all N
    processes run here and share the cores other processes do not hold (`taken`)."""
    if not command:
        raise UserError("no command to run: put it after --, e.g. -- python -m gluonperf.train --kvstore horovod")
    require("--engine horovod")
    hosts = list(hosts or [])
    env = {"PYTHONUNBUFFERED": "1"}
    if hosts:
        if any("@" in h.address for h in hosts):
            raise UserError("--engine horovod: horovodrun takes host names only; set the user of a host in "
                            "~/.ssh/config instead of user@host in the hostfile")
        ports = {h.port for h in hosts}
        if len(ports) > 1:
            raise UserError("--engine horovod: horovodrun takes one ssh port for all hosts; the hostfile has %s"
                            % ", ".join(sorted(str(p) for p in ports)))
        where = ["-H", host_slots(num_workers, hosts)]
        port = ports.pop()
        if port is not None:
            where += ["-p", str(port)]
    else:
        where = ["-H", "localhost:%d" % num_workers]
        env.update(local_thread_defaults(num_workers, taken=taken), **{LOCAL_WORKERS: str(num_workers)})
    argv = (python, "-m", "gluonperf.runtime.horovod_launcher", "-np", str(num_workers), *where, "--gloo", *command)
    return [Node("horovodrun", 0, argv, env, prefixed=False)]


def describe(nodes):
    """The --dry-run text: the command line and its environment, as one line to paste."""
    node = nodes[0]
    return "# %s on this machine (it starts the %s processes%s)\n%s" % (
        node.role, node.command[node.command.index("-np") + 1],
        " over ssh on the hosts of -H" if "localhost:" not in node.command[node.command.index("-H") + 1] else "",
        node.shell_line())



def run_horovodrun(argv):
    """horovodrun ARGV; its failure (a rank that exited non-zero) as one line on stderr and that
    rank's exit code, instead of a traceback."""
    from horovod.runner.launch import run_commandline
    sys.argv = ["horovodrun", *argv]
    try:
        run_commandline()
    except RuntimeError as e:
        text = " ".join(str(e).split())
        print("horovodrun: " + text, file=sys.stderr)
        code = re.search(r"Exit code: (-?\d+)", text)
        return int(code.group(1)) if code and int(code.group(1)) > 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(run_horovodrun(sys.argv[1:]))
