"""python -m gluonperf.launch: run a job on MXNet's parameter-server kvstore (dist_sync), or on
Horovod (--engine horovod).

    python -m gluonperf.launch -n 2 -s 1 -- python -m gluonperf.train --kvstore dist_sync ...
    python -m gluonperf.launch --engine horovod -n 2 -- python -m gluonperf.train --kvstore horovod ...

Parses and checks the flags, plans the scheduler, servers and workers (or horovodrun, which
starts the workers: `gluonperf.runtime.horovod_launcher`) and runs them with
`gluonperf.runtime.ps_launcher` (which says how: roles, the exit guard, prefixed output,
tear-down). With `--hostfile` the servers and workers run on the listed machines over ssh
(the scheduler runs here); `--dry-run` prints what would run without running it.

The launcher does not import mxnet: it only manages processes.
"""
import argparse
import os
import shutil
import sys

from . import UserError
from .cli.common import positive_float, positive_int, tcp_port
from .runtime import horovod_launcher, ps_launcher

PROG = "python -m gluonperf.launch"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + error
        raise UserError("%s (see --help)" % message)


def build_parser():
    p = _Parser(
        prog=PROG, usage="%(prog)s -n WORKERS [options] -- COMMAND...",
        description="Run COMMAND as the workers of a job on MXNet's parameter-server kvstore "
                    "(kvstore dist_sync / dist_device_sync), with 1 scheduler and -s servers "
                    "(python -c 'import mxnet' with DMLC_ROLE=scheduler/server), or with "
                    "--engine horovod as the ranks of a Horovod job (kvstore horovod), started by "
                    "horovodrun over Gloo. Every output "
                    "line is prefixed with [role number] (the launcher's numbering; ps-lite assigns "
                    "kv.rank). Exits with the workers' status; when any process fails, the "
                    "others are stopped and the exit is non-zero (a worker's own code, 128+N for "
                    "signal N, 124 on --timeout, 130 on Ctrl-C). Workers get an exit guard on "
                    "PYTHONPATH so that a failing worker exits instead of waiting for ever in "
                    "the kvstore's exit barrier.",
        epilog="examples: %(prog)s -n 2 -s 1 -- python -m gluonperf.train --kvstore dist_sync "
               "--model lenet --dataset digits; %(prog)s --engine horovod -n 2 -- python -m gluonperf.train "
               "--kvstore horovod --model lenet --dataset digits")
    p.add_argument("-n", "--num-workers", type=positive_int, required=True,
                   help="number of workers, each running COMMAND")
    p.add_argument("--engine", choices=("ps", "horovod"), default="ps",
                   help="ps: MXNet's parameter server (kvstore dist_sync); horovod: horovodrun with Gloo "
                        "(kvstore horovod; Horovod must be installed: bash scripts/install-horovod) "
                        "(default: %(default)s)")
    p.add_argument("-s", "--num-servers", type=positive_int, default=None,
                   help="number of servers (default: 1, or one per host with --hostfile; engine ps only)")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="SEC",
                   help="stop everything and exit 124 when the job runs longer than SEC seconds "
                        "(default: no limit)")
    p.add_argument("--hostfile", metavar="FILE",
                   help="run servers and workers on these machines over ssh (one host, host:port "
                        "or user@host per line; server i and worker i go to host i modulo the "
                        "number of hosts); the scheduler runs here. Needs password-less ssh and "
                        "the same Python environment and working directory on every host")
    p.add_argument("--host-ip", metavar="ADDRESS",
                   help="with --hostfile: this machine's address that the hosts can reach "
                        "(default: what the hostname resolves to)")
    p.add_argument("--port", type=tcp_port, default=None,
                   help="scheduler port (default: a free port picked here)")
    p.add_argument("--python", default=sys.executable,
                   help="Python that runs the scheduler and servers (python -c 'import mxnet'), or horovodrun "
                        "with --engine horovod; "
                        "with --hostfile it must exist at this path on every host "
                        "(default: %(default)s)")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="with --hostfile: also pass this environment variable to the hosts "
                        "(MXNET_*, PS_*, OMP_*, KMP_*, PYTHONPATH, LD_LIBRARY_PATH and "
                        "DMLC_INTERFACE are passed already); repeatable")
    p.add_argument("--dry-run", action="store_true",
                   help="print the exact command and environment of every process, run nothing")
    return p


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        cut = argv.index("--")
        own, command = argv[:cut], argv[cut + 1:]
    else:
        own, command = argv, []
    parser = build_parser()
    if any(a in ("-h", "--help") for a in own):
        parser.print_help()
        return 0
    args = parser.parse_args(own)
    if not command:
        raise UserError("no command to run: put it after --, e.g. %s -n 2 -- python train.py" % PROG)
    hosts = ps_launcher.read_hostfile(args.hostfile) if args.hostfile else None
    if not hosts and not shutil.which(command[0]):
        raise UserError("%s: no such command on this machine (not on PATH, or not an executable file)"
                        % command[0])
    if args.port and ps_launcher.port_in_use(args.port):
        raise UserError("--port %d is in use on this machine; give a free one, or leave --port out and a free "
                        "one is picked" % args.port)
    if (args.host_ip or args.env) and not hosts:
        raise UserError("--host-ip and --env only apply with --hostfile")
    if args.engine == "horovod":
        return _horovod(args, command, hosts)
    servers = args.num_servers or (len(hosts) if hosts else 1)
    taken = _cores_taken(hosts)
    remote = ps_launcher.Remote(tuple(hosts or ()), root_uri=args.host_ip, forward=tuple(args.env))
    nodes = ps_launcher.plan(command, args.num_workers, servers, remote, port=args.port, python=args.python,
                             taken=taken)
    if args.dry_run:
        print(ps_launcher.describe_nodes(nodes))
        return 0
    if not os.path.isfile(os.path.join(ps_launcher.EXIT_GUARD, "sitecustomize.py")):
        print("launch: warning: %s/sitecustomize.py is missing (install gluonperf with "
              "pip install -e); a failing worker will hang until --timeout" % ps_launcher.EXIT_GUARD,
              file=sys.stderr)
    where = "127.0.0.1" if not hosts else nodes[0].env["DMLC_PS_ROOT_URI"]
    print("launch: 1 scheduler, %d server(s), %d worker(s); scheduler at %s:%s%s"
          % (servers, args.num_workers, where, nodes[0].env["DMLC_PS_ROOT_PORT"],
             "" if not hosts else " (hosts: %s)" % ", ".join(map(str, hosts))),
          file=sys.stderr, flush=True)
    _note_threads(next((n.env.get("OMP_NUM_THREADS") for n in nodes if n.role == "worker" and n.host is None),
                       None), args.num_workers, taken)
    return ps_launcher.run(nodes, timeout=args.timeout)


def _cores_taken(hosts):
    """Cores other processes hold here, sampled before any process of the job starts (its own
    processes are not "others"); 0 with hosts, or when the user chose the threads."""
    from .runtime.threads import cores_taken, threads_chosen
    return cores_taken() if not hosts and not threads_chosen() else 0


def _note_threads(threads, workers, taken):
    """Say on stderr the OpenMP threads the launcher gave the workers on this machine, when it did."""
    if threads and "OMP_NUM_THREADS" not in os.environ:
        print("launch: note: OMP_NUM_THREADS was unset, so the %d workers on this machine get %s each "
              "(they share its %scores%s)" % (workers, threads, "free " if taken else "",
                                              ", %d being busy with other processes" % taken if taken else ""),
              file=sys.stderr, flush=True)


def _horovod(args, command, hosts):
    """--engine horovod: horovodrun starts the workers; the same timeout and tear-down."""
    for flag, given in (("-s", args.num_servers), ("--port", args.port), ("--host-ip", args.host_ip),
                        ("--env", args.env)):
        if given:
            raise UserError("%s applies to the parameter server (--engine ps); horovodrun picks its own "
                            "rendezvous and passes the whole environment on" % flag)
    taken = _cores_taken(hosts)
    nodes = horovod_launcher.plan(command, args.num_workers, hosts=hosts, python=args.python, taken=taken)
    if args.dry_run:
        print(horovod_launcher.describe(nodes))
        return 0
    print("launch: horovodrun, %d worker(s)%s" % (args.num_workers, "" if not hosts else " (hosts: %s)"
                                                   % ", ".join(map(str, hosts))), file=sys.stderr, flush=True)
    _note_threads(nodes[0].env.get("OMP_NUM_THREADS"), args.num_workers, taken)
    return ps_launcher.run(nodes, timeout=args.timeout)


if __name__ == "__main__":
    from .cli import common as cli  # no MXNet: cli loads it only where a command needs it
    cli.run(main, PROG)
