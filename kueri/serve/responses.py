"""What the routes of :mod:`kueri.serve.app` and :mod:`kueri.serve.pyserini` share: every failure as a JSON error
with its status (an answer is the engine's one call, :meth:`kueri.serve.engine.Engine.answer`)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse, Response

from kueri.errors import KueriError
from kueri.serve.checks import BadQuestion
from kueri.serve.feedback import BadFeedback
from kueri.serve.queue import Busy

log = logging.getLogger(__name__)


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
