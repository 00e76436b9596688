"""MXNet's parameter-server jobs (kvstore dist_sync): plan, start, watch and stop their processes.

The wheel carries ps-lite but not its launcher (tools/launch.py needs the dmlc tracker), so
this module is the launcher (`python -m gluonperf.launch`): one scheduler and S servers
(`python -c "import mxnet"` with DMLC_ROLE=scheduler/server: importing mxnet runs their loop;
gluonperf is imported first where installed, `SERVER_CODE`) and N workers running COMMAND
(ps-lite gives each its `kv.rank` once all have connected), here or over ssh on listed hosts
(the scheduler runs here). Every line a process prints is prefixed with its role and number.

The one thing to know: nothing is left behind. A failing process stops all the others (the
workers get an exit guard, gluonperf/workers/launch_site, so that a failed one does not wait forever
in the kvstore's exit barrier), a timeout bounds the job, Ctrl-C or SIGTERM tears it down, and
every process runs in its own session, stopped with `killpg`. It does not import mxnet. Why
and how: docs/commands/launch.md, "How it works" and "When anything fails, everything stops".
"""
import ipaddress
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .. import UserError
from .wire import LOCAL_WORKERS

# Environment variables passed on to processes started over ssh (locally every process
# inherits the whole environment).
FORWARD_PREFIXES = ("MXNET_", "PS_", "OMP_", "KMP_")
FORWARD_NAMES = ("PYTHONPATH", "LD_LIBRARY_PATH", "DMLC_INTERFACE")

# What the scheduler and servers run: importing mxnet with DMLC_ROLE set runs their loop;
# gluonperf first, where the interpreter has it, so that MXNet's start-up skips scikit-learn.
SERVER_CODE = 'import importlib.util; importlib.util.find_spec("gluonperf") and __import__("gluonperf"); import mxnet'

# gluonperf/workers/launch_site, put first on the workers' PYTHONPATH: its sitecustomize makes a failing
# worker exit at once instead of waiting forever in the dist kvstore's exit barrier (see the file).
EXIT_GUARD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workers", "launch_site")

SSH_OPTIONS = ("-tt",  # a remote tty: the remote command gets SIGHUP when ssh is stopped
               "-o", "BatchMode=yes",  # never wait for a password prompt
               "-o", "StrictHostKeyChecking=accept-new")


@dataclass(frozen=True)
class Host:
    """One line of a hostfile: `host`, `host:port` or `user@host:port` (ssh port)."""
    address: str
    port: int = None

    def __str__(self):
        return self.address if self.port is None else "%s:%d" % (self.address, self.port)

    @property
    def ip(self):
        """The address as an IP literal (without user@), or None when it is a name."""
        name = self.address.rsplit("@", 1)[-1]
        try:
            return str(ipaddress.ip_address(name))
        except ValueError:
            return None


@dataclass(frozen=True)
class Node:
    """One process of the job: its role, number, where it runs and with what."""
    role: str
    rank: int
    command: tuple            # what runs on its host
    env: dict = field(default_factory=dict)   # variables set for it on top of the environment
    host: Host = None         # None: this machine; else started over ssh
    cwd: str = None           # working directory on a remote host
    prefixed: bool = True     # False: the process prefixes its lines itself (horovodrun: [rank]<stderr>:)

    @property
    def name(self):
        return "%s %d" % (self.role, self.rank)

    def argv(self):
        """The exact argv the launcher runs on this machine for this node."""
        if self.host is None:
            return list(self.command)
        remote = "exec env %s %s" % (
            " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(self.env.items())),
            " ".join(shlex.quote(c) for c in self.command))
        if self.cwd:
            remote = "cd %s && %s" % (shlex.quote(self.cwd), remote)
        ssh = ["ssh", *SSH_OPTIONS]
        if self.host.port is not None:
            ssh += ["-p", str(self.host.port)]
        return ssh + [self.host.address, remote]

    def shell_line(self):
        """argv (and, locally, its environment) as one line to paste into a shell."""
        words = [shlex.quote(a) for a in self.argv()]
        if self.host is None:
            words = ["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(self.env.items())] + words
        return " ".join(words)


# --- planning: which process runs where, with what environment -----------------------

def read_hostfile(path):
    """Hosts listed one per line (`host`, `host:port`, `user@host`); blank lines and # comments
    are skipped. A missing or empty file is a UserError."""
    if not os.path.exists(path):
        raise UserError("hostfile %s does not exist; give a file with one host per line" % path)
    try:
        with open(path) as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("hostfile %s cannot be read (%s)" % (path, e))
    hosts = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        address, port = line, None
        if line.count(":") == 1:
            address, port_text = line.split(":")
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise UserError("hostfile %s line %d: %r is not host or host:port"
                                % (path, number, line))
            port = int(port_text)
        if not address or any(c.isspace() for c in address):
            raise UserError("hostfile %s line %d: %r is not host or host:port" % (path, number, line))
        hosts.append(Host(address, port))
    if not hosts:
        raise UserError("hostfile %s lists no hosts; put one host per line" % path)
    return hosts


def free_port(address="127.0.0.1"):
    """A TCP port nobody listens on right now at `address` (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def port_in_use(port):
    """Whether a process on this machine already listens on TCP `port` (the scheduler's bind would fail)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return True
    return False


def is_loopback(address):
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def scheduler_address(hosts):
    """This machine's address as the hosts should see it (the scheduler runs here)."""
    if not hosts or all(is_loopback(h.address.rsplit("@", 1)[-1]) for h in hosts):
        return "127.0.0.1"
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        address = None
    if address is None or is_loopback(address):
        raise UserError("cannot tell which address of this machine the hosts can reach "
                        "(hostname resolves to %s); pass --host-ip ADDRESS" % address)
    return address


def forwarded_environment(names=()):
    """Variables of this environment to pass to remote processes."""
    env = {k: v for k, v in os.environ.items()
           if k.startswith(FORWARD_PREFIXES) or k in FORWARD_NAMES}
    for name in names:
        if name not in os.environ:
            raise UserError("--env %s: that variable is not set here" % name)
        env[name] = os.environ[name]
    return env


def local_thread_defaults(num_workers, environ=None, taken=0):
    """OMP_NUM_THREADS for workers that share this machine's cores (each worker process
    would otherwise take one thread per core, and the workers together oversubscribe
    them), leaving out the `taken` cores other processes hold (advice.cores_taken);
    nothing when the user set it."""
    from .threads import thread_settings, threads_chosen
    if threads_chosen(environ):
        return {}
    return thread_settings(num_workers, taken)


@dataclass(frozen=True)
class Remote:
    """Where a job's servers and workers run over ssh: server i / worker i on hosts[i % len(hosts)],
    in `cwd` (default: this folder), with the variables FORWARD_PREFIXES and FORWARD_NAMES pick out
    and those named in `forward`; the scheduler runs here, at `root_uri` (default: this machine's
    address as the hosts see it, `scheduler_address`)."""
    hosts: tuple = ()
    root_uri: str = None
    cwd: str = None
    forward: tuple = ()


def plan(command, num_workers, num_servers=1, remote=None, port=None, python=sys.executable, taken=0):
    """The nodes of a job: 1 scheduler, `num_servers` servers, `num_workers` workers.

    Without `remote` hosts everything runs here on the loopback address, and the workers share
    the cores other processes do not hold (`taken` of them do). With them, as `Remote` says.
    """
    remote = remote or Remote()
    if not command:
        raise UserError("no command to run: put it after --, e.g. -- python train.py")
    if num_workers < 1 or num_servers < 1:
        raise UserError("need at least 1 worker and 1 server (got -n %d -s %d)" % (num_workers, num_servers))
    hosts = list(remote.hosts or [])
    root_uri = remote.root_uri or scheduler_address(hosts)
    port = port or free_port("127.0.0.1" if is_loopback(root_uri) else "")
    cwd = remote.cwd or os.getcwd()
    common = {"DMLC_PS_ROOT_URI": root_uri, "DMLC_PS_ROOT_PORT": str(port),
              "DMLC_NUM_SERVER": str(num_servers), "DMLC_NUM_WORKER": str(num_workers),
              "PYTHONUNBUFFERED": "1"}  # lines arrive as they are printed
    guarded_path = os.pathsep.join(p for p in (EXIT_GUARD, os.environ.get("PYTHONPATH")) if p)
    server_command = (python, "-c", SERVER_CODE)
    nodes = [Node("scheduler", 0, server_command, dict(common, DMLC_ROLE="scheduler"))]
    extra = forwarded_environment(remote.forward) if hosts else {}
    for role, count, cmd in (("server", num_servers, server_command),
                             ("worker", num_workers, tuple(command))):
        for i in range(count):
            env = dict(common, DMLC_ROLE=role)
            if role == "worker":
                env["PYTHONPATH"] = guarded_path
            if not hosts:
                env["DMLC_NODE_HOST"] = "127.0.0.1"  # bind to loopback, not the first NIC
                if role == "worker":  # the workers share this machine's cores (gluonperf.runtime.threads)
                    env.update(local_thread_defaults(num_workers, taken=taken),
                               **{LOCAL_WORKERS: str(num_workers)})
                nodes.append(Node(role, i, cmd, env))
                continue
            host = hosts[i % len(hosts)]
            if host.ip:  # a name is left to ps-lite (first interface, or DMLC_INTERFACE)
                env["DMLC_NODE_HOST"] = host.ip
            nodes.append(Node(role, i, cmd, dict(extra, **env), host, cwd))
    return nodes


def describe_nodes(nodes):
    """The --dry-run text: each node's place and exact command line with its environment."""
    lines = []
    for node in nodes:
        where = "this machine" if node.host is None else "%s over ssh" % node.host
        lines.append("# %s on %s" % (node.name, where))
        lines.append(node.shell_line())
    return "\n".join(lines)


# --- running: start, prefix output, watch, tear down -------------------------------------

def how(returncode):
    """'exit code 3' or 'signal SIGKILL' for a Popen returncode."""
    if returncode is not None and returncode < 0:
        try:
            return "signal %s" % signal.Signals(-returncode).name
        except ValueError:
            return "signal %d" % -returncode
    return "exit code %s" % returncode


def status_code(returncode):
    """A shell-style exit status: the code, or 128 + signal number."""
    return 128 - returncode if returncode < 0 else returncode


HELPERS = ("scheduler", "server")  # ps-lite's processes, which serve the workers and end after them


class JobFailed(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class Job:
    """The running processes of a plan, each in its own session (process group)."""

    def __init__(self, nodes, out=None, err=None):
        self.nodes = nodes
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.procs = {}        # node name -> Popen
        self.threads = []
        self.lock = threading.Lock()

    def start(self):
        for node in self.nodes:
            env = dict(os.environ, **node.env) if node.host is None else dict(os.environ)
            proc = subprocess.Popen(node.argv(), env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            self.procs[node.name] = proc
            for pipe, stream in ((proc.stdout, self.out), (proc.stderr, self.err)):
                prefix = "[%s] " % node.name if node.prefixed else ""
                t = threading.Thread(target=self._copy, args=(prefix, pipe, stream), daemon=True)
                t.start()
                self.threads.append(t)

    def _copy(self, prefix, pipe, stream):
        """Copy a child's output line by line, each line prefixed with its role and number."""
        with pipe:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")  # \r\n under ssh -tt
                with self.lock:
                    try:
                        stream.write("%s%s\n" % (prefix, line))
                        stream.flush()
                    except (BrokenPipeError, ValueError):
                        pass

    def note(self, message):
        with self.lock:
            print("launch: %s" % message, file=self.err, flush=True)

    def wait(self, timeout=None, shutdown_grace=15.0, poll=0.05):
        """Wait for the job; return 0 when every worker succeeds. When any process exits
        non-zero or time runs out, stop everything and raise JobFailed.

        A scheduler or server exiting 0 is normal once the workers have shut the kvstore
        down (possibly before a worker process itself has exited); after the workers finish,
        the scheduler and servers (HELPERS) get `shutdown_grace` seconds to exit before being
        stopped. Any other node (a worker, or horovodrun, which runs the workers) is waited for."""
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        role = {node.name: node.role for node in self.nodes}
        workers_done_at = None
        while True:
            codes = {name: proc.poll() for name, proc in self.procs.items()}
            for name, rc in codes.items():
                if rc not in (None, 0):
                    self.stop()
                    raise JobFailed("%s failed with %s; stopped the others" % (name, how(rc)),
                                    status_code(rc))
            running = [name for name, rc in codes.items() if rc is None]
            if not running:
                break
            now = time.monotonic()
            if workers_done_at is None and all(role[name] in HELPERS for name in running):
                workers_done_at = now
            if workers_done_at is not None and now - workers_done_at > shutdown_grace:
                self.stop()
                self.note("workers finished but %s did not exit within %g s; stopped"
                          % (", ".join(running), shutdown_grace))
                break
            if deadline is not None and now > deadline:
                self.stop()
                raise JobFailed("timed out after %g s; stopped %s" % (timeout, ", ".join(running)), 124)
            time.sleep(poll)
        self.join_output()
        return 0

    def stop(self, grace=3.0):
        """SIGTERM every process group, then SIGKILL what is left after `grace` seconds."""
        self._signal_all(signal.SIGTERM)
        end = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._signal_all(signal.SIGKILL)  # the groups, so grandchildren go too
        for proc in self.procs.values():
            proc.wait()
        self.join_output()

    def _signal_all(self, sig):
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, sig)  # start_new_session: the group id is the pid
            except (ProcessLookupError, PermissionError):
                pass

    def join_output(self, timeout=2.0):
        for t in self.threads:
            t.join(timeout)


class Terminated(Exception):
    """SIGTERM or SIGHUP reached the launcher."""
    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def run(nodes, timeout=None, out=None, err=None):
    """Start the nodes and wait for the job; returns the exit status (0 when all workers
    succeed). Whatever happens (failure, timeout, Ctrl-C, SIGTERM) every process is stopped."""
    job = Job(nodes, out, err)
    previous = {}
    arrived = []

    def terminated(signum, frame):
        raise Terminated(signum)

    def held(signum, frame):
        arrived.append(signum)

    if threading.current_thread() is threading.main_thread():
        # While the processes start, a signal is held until all are registered: raised inside
        # Popen, it left a process that had started but was not yet in job.procs running.
        # SIGINT only when Python handles it (a background job started with it ignored keeps that).
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if sig != signal.SIGINT or signal.getsignal(sig) is signal.default_int_handler:
                previous[sig] = signal.signal(sig, held)
    try:
        job.start()
        for sig in previous:
            signal.signal(sig, previous[sig] if sig == signal.SIGINT else terminated)
        if arrived:
            if arrived[0] == signal.SIGINT:
                raise KeyboardInterrupt
            raise Terminated(arrived[0])
        return job.wait(timeout)
    except JobFailed as e:
        job.note(str(e))
        return e.code
    except KeyboardInterrupt:
        job.note("interrupted; stopping every process")
        return 130
    except Terminated as e:
        job.note("%s received; stopping every process" % e)
        return 128 + e.signum
    finally:
        job.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
