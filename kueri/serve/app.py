"""The web face of ``kueri serve``: a page and a JSON API over one :class:`~kueri.serve.engine.Engine`.

Starlette (an ASGI framework) on uvicorn, Jinja2 templates; docs/serve.md gives the measurements behind the
choice. The page is rendered on the server from a plain GET form, so it works with JavaScript off; its one
stylesheet is served from here: nothing is loaded from outside the server.

    GET /                          the page (q, first, second, k, config)
    GET /api/search?q=...&k=...    the answer as JSON (objects=A,B and config optional)
    GET /api/health                whether it is ready, the corpus size, the configurations offered
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kueri.errors import KueriError
from kueri.serve.engine import MAX_K, MAX_QUESTION, Answer, BadQuestion, Busy, Engine, check_text, parse_objects

log = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
PAGE_K = 10  # passages the page shows unless asked for more
PAGE_MAX_K = 100
ANSWER_TIMEOUT = 600.0  # seconds a request waits for its answer: a cold question costs ~6 s on 2 quiet cores, and a
# burst of 32 of them queues (on a loaded machine, 4x that); past this a 503 says so instead of an endless wait
API_PARAMETERS = ("q", "k", "objects", "config")
PAGE_PARAMETERS = ("q", "first", "second", "k", "config")
SIDE_NAMES = {"FIRST": "first", "SECOND": "second", "NEUTRAL": "neutral", "NO": "no stance"}


def _parameters(query: Mapping[str, str], known: Iterable[str]) -> dict[str, str]:
    """The query's parameters; an unknown one is a :class:`BadQuestion` (a typo must not be silently ignored)."""
    known = tuple(known)
    unknown = sorted(set(query) - set(known))
    if unknown:
        raise BadQuestion(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return dict(query)


def _k(text: str | None, default: int, most: int) -> int:
    if text is None or text == "":
        return default
    try:
        k = int(text)
    except ValueError:
        raise BadQuestion(f"k must be a whole number, not {text[:20]!r}") from None
    if not 1 <= k <= most:
        raise BadQuestion(f"k must be between 1 and {most}, not {k}")
    return k


async def _answer(engine: Engine, question: str, objects: tuple[str, str] | None, config: str | None,
                  k: int) -> Answer:
    """From the cache at once, else queued on the pipeline thread (while the event loop serves others)."""
    engine.config(config)  # an unknown configuration is a 400 before anything is queued
    cached = engine.cached(question, objects, config, k)
    if cached is not None:
        return cached
    future = engine.on_pipeline(lambda: engine.ask(question, objects, config, k))
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), ANSWER_TIMEOUT)
    except TimeoutError:
        raise Busy(f"no answer within {ANSWER_TIMEOUT:.0f} s; the server is busy, try again") from None


async def search_json(engine: Engine, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    """``/api/search``: the status and the JSON body of the answer to a query's parameters (a 400 names the bad
    one; every failure is a JSON error and the server keeps serving)."""
    try:
        given = _parameters(query, API_PARAMETERS)
        question = check_text(given.get("q", ""), "question", MAX_QUESTION)
        objects = parse_objects(given["objects"]) if given.get("objects") else None
        answer = await _answer(engine, question, objects, given.get("config") or None,
                               _k(given.get("k"), PAGE_K, MAX_K))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        status, message = _error_status(exc)
        return status, {"error": message, "status": status}
    return 200, answer.as_json()


def _error_status(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, BadQuestion):
        return 400, str(exc)
    if isinstance(exc, Busy):
        return 503, str(exc)
    if isinstance(exc, KueriError):
        log.error("serve: %s", exc)
        return 500, str(exc)
    log.exception("serve: unexpected error")
    return 500, f"internal error ({type(exc).__name__}); the server logged it and keeps serving"


def create_app(engine: Engine) -> Starlette:
    """The ASGI application over ``engine`` (started or not: /api/health says which)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(side_names=SIDE_NAMES, max_question=MAX_QUESTION, page_max_k=PAGE_MAX_K)

    async def api_search(request: Request) -> Response:
        status, body = await search_json(engine, request.query_params)
        return JSONResponse(body, status_code=status)

    async def api_health(request: Request) -> Response:
        return JSONResponse(engine.health())

    async def page(request: Request) -> Response:
        context: dict[str, Any] = {"engine": engine, "form": {}, "answer": None, "error": None}
        status = 200
        try:
            given = _parameters(request.query_params, PAGE_PARAMETERS)
            context["form"] = given
            if "q" in given:
                question = check_text(given["q"], "question", MAX_QUESTION)
                first, second = given.get("first", "").strip(), given.get("second", "").strip()
                if bool(first) != bool(second):
                    raise BadQuestion("name both objects, or leave both empty to have them found in the question")
                objects = parse_objects(f"{first},{second}") if first else None
                context["answer"] = await _answer(engine, question, objects, given.get("config") or None,
                                                  _k(given.get("k"), PAGE_K, PAGE_MAX_K))
        except Exception as exc:  # noqa: BLE001 - the page shows a note instead of a traceback
            status, context["error"] = _error_status(exc)
        return templates.TemplateResponse(request, "page.html", context, status_code=status)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {404: f"no such page: {request.url.path}", 405: f"method {request.method} is not allowed here; "
                   "use GET"}.get(status, "error")
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message, "status": status}, status_code=status)
        return templates.TemplateResponse(request, "page.html", {"engine": engine, "form": {}, "answer": None,
                                                                 "error": message}, status_code=status)

    async def server_error(request: Request, exc: Exception) -> Response:
        status, message = _error_status(exc)
        return JSONResponse({"error": message, "status": status}, status_code=status)

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/api/search", api_search, methods=["GET"]),
        Route("/api/health", api_health, methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    handlers: Mapping[Any, Any] = {404: not_found, 405: not_found, 500: server_error}
    return Starlette(routes=routes, exception_handlers=dict(handlers))
