"""Scale-out on a Ray cluster: connecting to one, and mapping tasks over ordered batches.

Ray is an optional extra (``pip install 'kueri[ray]'``), imported only here and only when a command is
given ``--ray ADDRESS`` (``auto``: the cluster ``ray start`` made on this machine; ``host:port``: its
head). Every node needs the same kueri install; Ray retries a task whose worker dies, so a task must be
safe to run again (each of kueri's writes its own output from scratch). Results come back in
submission order, whatever order the tasks finish in, so outputs are written in corpus order.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Iterator
from typing import Any

from kueri.errors import EnvironmentProblem, SetupError
from kueri.processes import in_order

log = logging.getLogger(__name__)

#: A task is run again this often when its worker process (or node) dies.
TASK_RETRIES = 3


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
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
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
