"""Start ``kueri serve``: bind the port first (a port in use fails at once), load everything, then serve."""

from __future__ import annotations

import errno
import ipaddress
import logging
import signal
import socket
from collections.abc import Sequence
from pathlib import Path

from kueri.errors import SetupError
from kueri.records import Topic

log = logging.getLogger(__name__)


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (not listening yet: a client is refused, not left hanging, while the
    server loads); a port in use or a host that is not this machine's is one :class:`SetupError` line."""
    if not 0 <= port <= 65535:
        raise SetupError(f"--port must be between 0 and 65535, not {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise SetupError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise SetupError(f"port {port} on {host} is in use (another server?); pick another with --port") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise SetupError(f"port {port} on {host} needs privileges; use a port above 1023") from None
        raise SetupError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def beyond_this_machine(host: str) -> bool:
    """Whether an address others can reach (not loopback); a name (other than localhost) counts as reachable."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return True


def serve(*, corpus: str | Path | None, index: str | Path | None, configs: Sequence[str], host: str, port: int,
          workdir: str | Path | None, topics: Sequence[Topic], preembed: bool | None, progress: bool,
          max_wait: float | None = None, feedback: bool = True) -> None:
    """Serve until SIGINT or SIGTERM, then close the indexes and leave (exit code 0)."""
    try:
        import uvicorn

        from kueri.serve.app import create_app
    except ImportError as exc:
        raise SetupError(f"kueri serve needs the serve extra ({exc.name} is missing): pip install 'kueri[serve]'"
                         ) from None
    from kueri.serve.engine import Engine
    from kueri.serve.feedback import FeedbackLog
    from kueri.serve.queue import MAX_WAIT

    if max_wait is not None and max_wait <= 0:
        raise SetupError(f"--max-wait must be a positive number of seconds, not {max_wait:g}")
    sock = bind(host, port)
    engine = Engine(corpus=corpus, index=index, configs=configs, workdir=workdir, topics=topics, progress=progress,
                    max_wait=max_wait or MAX_WAIT)
    judgments = FeedbackLog(engine.workdir) if feedback else None
    try:
        log.info("serve: loading %s with configuration %s", corpus or index, ", ".join(engine.configs))
        engine.start(preembed)
        config = uvicorn.Config(create_app(engine, judgments), log_level="warning", access_log=False,
                                timeout_graceful_shutdown=5, server_header=False)
        server = uvicorn.Server(config)

        def stop(*_: object) -> None:
            server.should_exit = True

        # A stop that comes before uvicorn takes the signals over (it may, right after "ready") must stop it too;
        # and uvicorn re-raises the signal that stopped it once it is down: for a server that is the normal end,
        # not an interruption (the CLI's own SIGTERM handler would make it exit 143).
        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            sock.listen(2048)  # from here a client waits in the backlog until uvicorn's loop accepts it
            bound_host, bound_port = sock.getsockname()[:2]
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            if beyond_this_machine(bound_host):
                log.warning("serve: listening on %s, beyond this machine: anyone who can reach it may ask questions"
                            "%s; there is no login (use --host 127.0.0.1 to keep it local)", shown,
                            " and write feedback into the work folder" if judgments else "")
            log.info("serve: ready at http://%s:%d/ (stop with Ctrl+C)", shown, bound_port)
            server.run(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("serve: stopped")
    finally:
        engine.close()
        sock.close()
