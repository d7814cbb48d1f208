"""What the routes of :mod:`kueri.serve.app` and :mod:`kueri.serve.pyserini` share: an answer awaited without
holding up the event loop, and every failure as a JSON error with its status."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.responses import JSONResponse, Response

from kueri.errors import KueriError
from kueri.serve.answer import Answer
from kueri.serve.checks import BadQuestion
from kueri.serve.engine import Engine
from kueri.serve.feedback import BadFeedback
from kueri.serve.queue import Busy

log = logging.getLogger(__name__)


async def answer(engine: Engine, question: str, objects: tuple[str, str] | None, config: str | None,
                 k: int, aspect: str | None = None) -> Answer:
    """From the cache at once, else queued on the pipeline thread by its expected cost (while the event loop serves
    others); a :class:`Busy` at once when the queue would keep it longer than its ``max_wait``, or when it waited
    that long (a question that has not started by then is taken off the queue)."""
    engine.config(config)  # an unknown configuration is a 400 before anything is queued
    cached = engine.cached(question, objects, config, k, aspect)
    if cached is not None:
        return cached
    # its expected cost (cached, warm or cold) orders it in the queue: probed on the pipeline thread before the next
    # ranking starts (Java is used from that thread only)
    future = engine.queue.submit(lambda cost: engine.ask(question, objects, config, k, aspect, cost), question=True,
                                 probe=lambda: engine.expected_cost(question, objects, config))
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), engine.queue.max_wait or None)
    except TimeoutError:
        future.cancel()
        raise Busy(f"no answer within {engine.queue.max_wait:.0f} s; the server is busy, try again later",
                   engine.queue.retry_after()) from None


def error_status(exc: Exception) -> tuple[int, str]:
    """The HTTP status of a failure and its one-line message (an unexpected one is logged with its traceback)."""
    if isinstance(exc, BadQuestion | BadFeedback):
        return 400, str(exc)
    if isinstance(exc, Busy):
        return 503, str(exc)
    if isinstance(exc, KueriError):
        log.error("serve: %s", exc)
        return 500, str(exc)
    log.exception("serve: unexpected error")
    return 500, f"internal error ({type(exc).__name__}); the server logged it and keeps serving"


def error_headers(exc: Exception) -> dict[str, str] | None:
    """A 503 says when to come back (:meth:`Busy.headers`); other failures carry no header of their own."""
    return exc.headers() if isinstance(exc, Busy) else None


def error_body(status: int, message: str, shape: str = "kueri") -> dict[str, Any]:
    """kueri's ``{"error", "status"}``, or pyserini's (FastAPI's) ``{"detail"}``."""
    return {"detail": message} if shape == "pyserini" else {"error": message, "status": status}


def error_response(exc: Exception, shape: str = "kueri") -> Response:
    """The JSON error for ``exc`` in ``shape`` (:func:`error_body`)."""
    status, message = error_status(exc)
    return JSONResponse(error_body(status, message, shape), status_code=status, headers=error_headers(exc))
