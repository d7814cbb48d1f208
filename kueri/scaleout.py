"""Scale-out on a Ray cluster: connecting to one, and mapping tasks over ordered batches.

Ray is an optional extra (``pip install 'kueri[ray]'``), imported only here and only when a command is
given ``--ray ADDRESS`` (``auto``: the cluster ``ray start`` made on this machine; ``host:port``: its
head). Every node needs the same kueri install; Ray retries a task whose worker dies, so a task must be
safe to run again (each of kueri's writes its own output from scratch). Results come back in
submission order, whatever order the tasks finish in, so outputs are written in corpus order.

:func:`local_cluster` starts a private Ray head on this machine (the tests' and benchmarks' cluster, or a
user's to try ``--ray``) and stops only that head's processes. ``ray stop`` cannot: it kills every
process named like Ray's (``raylet``, ``gcs_server``, ...) that the user may kill, so it took down
another cluster of the same user on the same machine ("Failed to connect to GCS within 60 seconds"
in that cluster's driver). The private head has its own temp folder (its session directory, sockets,
logs, and the ``ray_current_cluster`` address file, which ``ray start`` otherwise overwrites in
``/tmp/ray``), its own ports, and its own Unix session (``ray start`` runs with ``setsid``): every
process Ray starts for it, workers included, inherits that session, which is how they are found again.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kueri.errors import EnvironmentProblem, SetupError
from kueri.processes import in_order

log = logging.getLogger(__name__)

#: A task is run again this often when its worker process (or node) dies.
TASK_RETRIES = 3

#: Topics per task of a run on Ray (``--ray-batch``) by default: small, so that even the sample's 50 topics make 13
#: tasks, several in flight at once, and a lost worker loses little; a task's fixed costs (opening the index, loading
#: the models) are paid once per worker process, not per task.
RAY_BATCH = 4


#: Signals a JVM catches as part of its normal work (SIGSEGV: implicit null checks in compiled code, ...).
_FAULT_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)


@contextlib.contextmanager
def _native_fault_handlers_kept(numbers: tuple[int, ...] = _FAULT_SIGNALS) -> Iterator[None]:
    """Put back, after the block, the native handlers of ``numbers`` (:data:`_FAULT_SIGNALS`) installed before it.

    ``ray.init`` installs crash-report handlers for these signals that re-send the signal with ``kill``. A JVM in
    this process (Lucene, started before) takes real SIGSEGVs in its compiled code and handles them; through
    Ray's handler one arrives as "sent by kill", which the JVM takes for a crash: the driver died with SIGABRT
    while merging a vector index after a Ray embedding (hs_err: "SIGSEGV (0xb) ... (sent by kill)"). A signal
    without a native handler before (no JVM yet) keeps Ray's.
    """
    saved = {}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for number in numbers:
            action = ctypes.create_string_buffer(512)  # more than sizeof(struct sigaction) (152 on x86-64 glibc)
            if libc.sigaction(int(number), None, action) == 0 and any(action.raw[:8]):  # a handler, not SIG_DFL
                saved[number] = action
    except (OSError, AttributeError):  # no C library to ask: nothing to keep
        saved = {}
    try:
        yield
    finally:
        for number, action in saved.items():
            libc.sigaction(int(number), action, None)


def connect(address: str) -> Any:
    """The ``ray`` module, connected to the cluster at ``address``; one clear line when it cannot be."""
    try:
        import ray
    except ImportError:
        raise SetupError("--ray needs Ray: pip install 'kueri[ray]'") from None
    if ray.is_initialized():
        return ray
    if address != "auto":
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise SetupError(f"--ray {address!r}: give the head node as host:port, or auto")
        try:  # before ray.init, which retries an unreachable address for minutes
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as exc:
            raise EnvironmentProblem(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None
    # ray.init sets a SIGTERM handler of its own (sys.exit(15), after a crash report on stderr): the command's own
    # (kueri.cli: unwind like ^C, say so in one line) is put back, or a stopped driver would end without its line.
    python_handler = signal.getsignal(signal.SIGTERM)
    try:
        with _native_fault_handlers_kept(_FAULT_SIGNALS + (signal.SIGTERM,)):
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        if python_handler is not None:
            signal.signal(signal.SIGTERM, python_handler)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EnvironmentProblem(f"cannot connect to the Ray cluster at {address}: {first}") from None
    log.info("Ray cluster at %s: %s CPUs", address, int(ray.cluster_resources().get("CPU", 0)))
    return ray


def cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def ordered_map(ray: Any, task: Any, batches: Iterable[Any], *args: Any, window: int | None = None) -> Iterator[Any]:
    """``task.remote(batch, *args)`` for every batch, results in batch order; at most ``window`` batches in
    flight (twice the cluster's CPUs by default), so the driver never holds the whole input."""
    yield from in_order(lambda batch: task.remote(batch, *args), ray.get, batches, window or 2 * cluster_cpus(ray))


# -- a private Ray head on this machine ---------------------------------------------------------------------

#: The ports ``ray start --head`` would otherwise take at fixed defaults (6379, 8265, 10001, 52365, ...)
#: or leave to chance, each given a free one so two heads on one machine never meet.
#: (Ray's client server, 10001, runs only with ``ray[client]``'s grpc, and the flag is refused without it.)
_PORT_FLAGS = ("--port", "--node-manager-port", "--object-manager-port", "--dashboard-port",
               "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port",
               "--metrics-export-port")


@dataclass(frozen=True)
class LocalCluster:
    """A Ray head kueri started on this machine (:func:`start_local_cluster`)."""

    address: str  # 127.0.0.1:port of its GCS, for --ray and ray.init
    temp_dir: Path  # its own temp folder: session directory, sockets, logs, address file
    session: int  # the Unix session id of all its processes (that of the ``ray start`` it ran)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now (all held open together, so none repeats)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def _ray_command() -> str:
    beside = Path(sys.executable).parent / "ray"  # the ray of this Python's environment
    found = str(beside) if beside.is_file() else shutil.which("ray")
    if not found:
        raise SetupError("no ray command: pip install 'kueri[ray]'")
    return found


def _temp_root() -> str:
    # Ray's Unix sockets live at <temp>/session_<date>_<pid>/sockets/...: a socket path has at most 107
    # bytes, so a long TMPDIR (a test's) would break the head; /tmp is short.
    root = tempfile.gettempdir()
    return root if len(root) <= 20 else "/tmp"


def start_local_cluster(num_cpus: int, *, env: Mapping[str, str] | None = None, timeout: float = 180) -> LocalCluster:
    """Start a Ray head on 127.0.0.1 with ``num_cpus`` CPUs, in its own temp folder, ports and Unix session.

    ``env``: variables added for Ray (e.g. ``RAY_AUTH_MODE``). One clear line when it does not start.
    """
    flags = [*_PORT_FLAGS, *(["--ray-client-server-port"] if importlib.util.find_spec("grpc") else [])]
    ports = free_ports(len(flags))
    temp_dir = Path(tempfile.mkdtemp(prefix="kueri-ray-", dir=_temp_root()))
    command = [_ray_command(), "start", "--head", "--node-ip-address", "127.0.0.1", "--num-cpus", str(num_cpus),
               "--temp-dir", str(temp_dir), "--include-dashboard", "false", "--disable-usage-stats",
               "--min-worker-port", "0", "--max-worker-port", "0",  # workers: any free port, not 10002-19999
               *(arg for flag, port in zip(flags, ports, strict=True) for arg in (flag, str(port)))]
    environment = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
    # start_new_session: ``ray start`` leads a new session, and every process it leaves running keeps it
    starter = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    cluster = LocalCluster(f"127.0.0.1:{ports[0]}", temp_dir, starter.pid)
    try:
        output, _ = starter.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        starter.kill()
        starter.communicate()
        output = f"no answer within {timeout:.0f} s"
    if starter.returncode != 0:
        stop_local_cluster(cluster)
        last = (output.strip().splitlines() or ["(no output)"])[-1]
        raise EnvironmentProblem(f"cannot start a Ray head in {temp_dir}: {last}")
    log.info("Ray head at %s (temp folder %s, session %d)", cluster.address, temp_dir, cluster.session)
    return cluster


class _Process(NamedTuple):
    state: str
    parent: int
    session: int
    started: int  # clock ticks after boot: with the pid, names one process even if the pid is reused later


def _proc_stat(pid: int) -> _Process | None:
    """A process as /proc sees it, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return _Process(fields[0], int(fields[1]), int(fields[3]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _members(cluster: LocalCluster) -> dict[int, int]:
    """pid -> start time of ``cluster``'s live processes (see :func:`cluster_processes`)."""
    uid = os.getuid()
    mine: dict[int, _Process] = {}  # this user's live processes
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
        except OSError:
            continue
        process = _proc_stat(int(entry))
        if process is not None and process.state not in ("Z", "X"):  # a zombie is gone already
            mine[int(entry)] = process
    protected = set()
    pid = os.getpid()
    while pid > 1 and pid not in protected:
        protected.add(pid)
        pid = mine[pid].parent if pid in mine else 0
    temp = str(cluster.temp_dir)
    members = {pid for pid, process in mine.items()
               if process.session == cluster.session or temp in _command_line(pid)} - protected
    while True:  # a process that left the session is still a child of one that did not (workers of the raylet)
        more = {pid for pid, process in mine.items() if process.parent in members} - members - protected
        if not more:
            return {pid: mine[pid].started for pid in members}
        members |= more


def cluster_processes(cluster: LocalCluster) -> list[int]:
    """The live processes of ``cluster``: this user's processes in its session or naming its temp folder,
    and their descendants; never this process or its ancestors. Linux (/proc)."""
    return sorted(_members(cluster))


def _alive(processes: Mapping[int, int]) -> dict[int, int]:
    """Those of ``processes`` (pid -> start time) still running: the same pid and start time, not a zombie."""
    alive = {}
    for pid, started in processes.items():
        process = _proc_stat(pid)
        if process is not None and process.started == started and process.state not in ("Z", "X"):
            alive[pid] = started
    return alive


def _signal(pids: Iterable[int], number: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, number)


def stop_local_cluster(cluster: LocalCluster, grace: float = 5.0) -> list[int]:
    """Stop ``cluster``'s processes, and only them, then remove its temp folder; returns the pids stopped.

    SIGTERM in ``ray stop``'s order (the raylet first, the GCS last, so none complains of a missing peer),
    SIGKILL for what is left after ``grace`` seconds; then again for any worker started meanwhile.
    """
    stopped: set[int] = set()
    for _ in range(3):
        members = _members(cluster)
        if not members:
            break
        stopped.update(members)
        names = {pid: _command_line(pid) for pid in members}
        raylet = [pid for pid in members if "/raylet " in names[pid]]
        gcs = [pid for pid in members if "gcs_server" in names[pid]]
        for group in (raylet, [pid for pid in members if pid not in raylet and pid not in gcs], gcs):
            _signal(_alive({pid: members[pid] for pid in group}), signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(members) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal(_alive(members), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(members) and time.monotonic() < deadline:
            time.sleep(0.05)
    left = cluster_processes(cluster)
    if left:
        log.warning("Ray head %s: processes %s did not stop", cluster.address, left)
    shutil.rmtree(cluster.temp_dir, ignore_errors=True)
    return sorted(stopped)


@contextlib.contextmanager
def local_cluster(num_cpus: int, *, env: Mapping[str, str] | None = None) -> Iterator[LocalCluster]:
    """A private Ray head for the block (:func:`start_local_cluster`), stopped after it (:func:`stop_local_cluster`)."""
    cluster = start_local_cluster(num_cpus, env=env)
    try:
        yield cluster
    finally:
        stop_local_cluster(cluster)
