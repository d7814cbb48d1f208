"""The web face of ``kueri serve``: a page and a JSON API over one :class:`~kueri.serve.engine.Engine`.

Starlette (an ASGI framework) on uvicorn, Jinja2 templates; docs/serve.md gives the measurements behind the
choice. The page is rendered on the server from plain forms, so it works with JavaScript off; its one
stylesheet is served from here: nothing is loaded from outside the server (the Content-Security-Policy
says so to the browser too).

    GET  /                                      the page (q, first, second, aspect, narrow, k, config)
    GET  /api/search?q=...&k=...                the answer as JSON (objects, config, aspect, narrow, format)
    GET  /api/health                            whether it is ready, the corpus size, the queue
    POST /api/feedback                          a reader's "useful" / "not useful" for a passage
    GET  /v1/indexes/{config}/search?query=...  pyserini's REST search shape; /v1/indexes/{config}/documents/{id}
    GET  /openapi.json, /api/docs               the OpenAPI 3 document, and as a page
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kueri.errors import KueriError
from kueri.serve.answer import Answer
from kueri.serve.checks import MAX_K, MAX_OBJECT, MAX_QUESTION, BadQuestion, check_text, parse_objects
from kueri.serve.engine import Engine
from kueri.serve.feedback import BadFeedback, FeedbackLog, Judgment
from kueri.serve.openapi import document
from kueri.serve.queue import Busy

log = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent
PAGE_K = 10  # passages the page shows unless asked for more
PAGE_MAX_K = 100
API_PARAMETERS = ("q", "k", "objects", "config", "aspect", "narrow", "format")
PAGE_PARAMETERS = ("q", "first", "second", "aspect", "narrow", "k", "config")
PYSERINI_PARAMETERS = ("query", "hits", "qid")
MAX_BODY = 10_000  # bytes of a feedback request
#: Every response: nothing from elsewhere (scripts, styles, frames, forms), no framing of the page by others.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                                 b"base-uri 'none'; form-action 'self'; object-src 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def _parameters(query: Mapping[str, str], known: Iterable[str]) -> dict[str, str]:
    """The query's parameters; an unknown one is a :class:`BadQuestion` (a typo must not be silently ignored)."""
    known = tuple(known)
    unknown = sorted(set(query) - set(known))
    if unknown:
        raise BadQuestion(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return dict(query)


def _k(text: str | None, default: int, most: int, name: str = "k") -> int:
    if text is None or text == "":
        return default
    try:
        k = int(text)
    except ValueError:
        raise BadQuestion(f"{name} must be a whole number, not {text[:20]!r}") from None
    if not 1 <= k <= most:
        raise BadQuestion(f"{name} must be between 1 and {most}, not {k}")
    return k


def _aspect(given: Mapping[str, str]) -> str | None:
    """The aspect asked for: None when the parameter is absent (the question's own), "" for none."""
    if "aspect" not in given:
        return None
    text = " ".join(given["aspect"].split())
    return check_text(text, "aspect", MAX_OBJECT) if text else ""


def _flag(text: str | None, name: str) -> bool:
    if text in (None, "", "0"):
        return False
    if text == "1":
        return True
    raise BadQuestion(f"{name} must be 0 or 1, not {text[:20]!r}")


async def _answer(engine: Engine, question: str, objects: tuple[str, str] | None, config: str | None,
                  k: int, aspect: str | None = None) -> Answer:
    """From the cache at once, else queued on the pipeline thread (while the event loop serves others); a
    :class:`Busy` at once when the queue would keep it longer than the engine's ``max_wait``, or when it
    waited that long (a question that has not started by then is taken off the queue)."""
    engine.config(config)  # an unknown configuration is a 400 before anything is queued
    cached = engine.cached(question, objects, config, k, aspect)
    if cached is not None:
        return cached
    future = engine.queue.submit(lambda: engine.ask(question, objects, config, k, aspect), question=True)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), engine.queue.max_wait or None)
    except TimeoutError:
        future.cancel()
        raise Busy(f"no answer within {engine.queue.max_wait:.0f} s; the server is busy, try again later",
                   engine.queue.retry_after()) from None


async def search_json(engine: Engine, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    """``/api/search``: the status and the JSON body of the answer to a query's parameters (a 400 names the bad
    one; every failure is a JSON error and the server keeps serving)."""
    status, body, _ = await _search(engine, query)
    return status, body


async def _search(engine: Engine, query: Mapping[str, str]) -> tuple[int, dict[str, Any], Answer | None]:
    try:
        given = _parameters(query, API_PARAMETERS)
        question = check_text(given.get("q", ""), "question", MAX_QUESTION)
        objects = parse_objects(given["objects"]) if given.get("objects") else None
        if given.get("format", "json") not in ("json", "run"):
            raise BadQuestion(f"format must be json or run, not {given['format'][:20]!r}")
        narrow = _flag(given.get("narrow"), "narrow")
        answer = await _answer(engine, question, objects, given.get("config") or None,
                               _k(given.get("k"), PAGE_K, MAX_K), _aspect(given))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        status, message = _error_status(exc)
        return status, {"error": message, "status": status}, None
    if narrow:
        answer = answer.narrowed()
    return 200, answer.as_json(), answer


def _error_status(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, BadQuestion | BadFeedback):
        return 400, str(exc)
    if isinstance(exc, Busy):
        return 503, str(exc)
    if isinstance(exc, KueriError):
        log.error("serve: %s", exc)
        return 500, str(exc)
    log.exception("serve: unexpected error")
    return 500, f"internal error ({type(exc).__name__}); the server logged it and keeps serving"


def _error_response(exc: Exception, shape: str = "kueri") -> Response:
    """The JSON error for ``exc``: kueri's ``{"error", "status"}`` or pyserini's ``{"detail"}``; a 503 says
    when to come back (Retry-After)."""
    status, message = _error_status(exc)
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else None
    body = {"detail": message} if shape == "pyserini" else {"error": message, "status": status}
    return JSONResponse(body, status_code=status, headers=headers)


def _download(name: str, kind: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{name}.{kind}"'}


def _file_name(answer: Answer) -> str:
    words = "-".join("".join(c if c.isalnum() else " " for c in answer.question.lower()).split()[:8])
    return f"kueri-{words or 'answer'}"


def security_headers(app: Any) -> Any:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP response."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await app(scope, receive, send_with_headers)

    wrapped.inner = app  # type: ignore[attr-defined]  # the application itself (its routes)
    return wrapped


async def _body(request: Request) -> bytes:
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise BadFeedback(f"the request is larger than {MAX_BODY // 1000} kB")
    return data


def _judgment(engine: Engine, request: Request, data: bytes) -> tuple[Judgment, str | None]:
    """The judgment a feedback request carries, and where to send the reader back to (a form from the page)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    back = None
    try:
        if kind == "application/json":
            fields = json.loads(data.decode("utf-8"))
            if not isinstance(fields, dict):
                raise ValueError("not an object")
            question, passage, useful = fields.get("question"), fields.get("passage"), fields.get("useful")
            objects, rank, config = fields.get("objects"), fields.get("rank"), fields.get("config")
            if not isinstance(useful, bool):
                raise BadFeedback("useful must be true or false")
        elif kind == "application/x-www-form-urlencoded":
            form = {k: v[-1] for k, v in urllib.parse.parse_qs(data.decode("utf-8"), strict_parsing=False).items()}
            question, passage, config = form.get("q"), form.get("id"), form.get("config")
            if form.get("useful") not in ("yes", "no"):
                raise BadFeedback("useful must be yes or no")
            useful = form["useful"] == "yes"
            rank = form.get("rank")
            objects = [form["first"], form["second"]] if form.get("first") and form.get("second") else None
            back = form.get("back") or "/"
        else:
            raise BadFeedback("send the judgment as application/json or a form (application/x-www-form-urlencoded)")
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadFeedback(f"the request is not valid JSON or form data ({exc})") from None
    if not isinstance(question, str) or not isinstance(passage, str):
        raise BadFeedback("name the question and the passage")
    question = check_text(question, "question", MAX_QUESTION)
    passage = check_text(passage, "passage id", 200)
    if objects is not None and (not isinstance(objects, list) or len(objects) != 2
                                or not all(isinstance(o, str) for o in objects)):
        raise BadFeedback("objects must be a list of two names")
    try:
        rank_number = int(rank) if rank not in (None, "") else None
    except (TypeError, ValueError):
        raise BadFeedback(f"rank must be a whole number, not {str(rank)[:20]!r}") from None
    config_name = engine.config(config or None).name
    if back is not None and (not back.startswith("/") or back.startswith("//")):
        back = "/"  # only back to this server's page
    return Judgment(question, [check_text(o, "object", MAX_OBJECT) for o in objects] if objects else None,
                    config_name, passage, rank_number, bool(useful)), back


def create_app(engine: Engine, feedback: FeedbackLog | None = None) -> Any:
    """The ASGI application over ``engine`` (started or not: /api/health says which); ``feedback``: where
    readers' judgments go (None: feedback is off)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(max_question=MAX_QUESTION, page_max_k=PAGE_MAX_K, feedback=feedback is not None)

    async def api_search(request: Request) -> Response:
        status, body, answer = await _search(engine, request.query_params)
        if answer is None:
            headers = {"Retry-After": str(engine.queue.retry_after())} if status == 503 else None
            return JSONResponse(body, status_code=status, headers=headers)
        kind = request.query_params.get("format")
        if kind == "run":
            return PlainTextResponse("".join(engine.run_lines(answer)), headers=_download(_file_name(answer), "txt"))
        return JSONResponse(body, headers=_download(_file_name(answer), "json") if kind == "json" else None)

    async def api_health(request: Request) -> Response:
        return JSONResponse({**engine.health(), "feedback": feedback is not None})

    async def api_feedback(request: Request) -> Response:
        if feedback is None:
            return JSONResponse({"error": "feedback is off on this server (kueri serve --no-feedback)",
                                 "status": 404}, status_code=404)
        try:
            judgment, back = _judgment(engine, request, await _body(request))
            await asyncio.to_thread(feedback.record, judgment)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
            status, message = _error_status(exc)
            if "larger than" in message:
                status = 413
            return JSONResponse({"error": message, "status": status}, status_code=status)
        if back is not None:
            return RedirectResponse(back, status_code=303)
        return JSONResponse({"recorded": True})

    async def openapi(request: Request) -> Response:
        return JSONResponse(document(list(engine.configs)))

    async def api_page(request: Request) -> Response:
        return templates.TemplateResponse(request, "api.html", {"spec": document(list(engine.configs)),
                                                                "engine": engine})

    async def pyserini_search(request: Request) -> Response:
        """pyserini's ``GET /v1/indexes/{index}/search``: ``{"query": {"qid", "text"}, "candidates": [{"docid",
        "score", "doc": {"id", "contents"}}]}``, the configuration named ``index`` ranking the query as a question."""
        name = request.path_params["index"]
        try:
            given = _parameters(request.query_params, PYSERINI_PARAMETERS)
            if name not in engine.configs:
                return JSONResponse({"detail": f"index {name!r} is not served here; served: "
                                               f"{', '.join(engine.configs)}"}, status_code=404)
            query = check_text(given.get("query", ""), "query", MAX_QUESTION)
            hits = _k(given.get("hits"), 10, MAX_K, "hits")
            answer = await _answer(engine, query, None, name, hits)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
            return _error_response(exc, "pyserini")
        return JSONResponse({"query": {"qid": given.get("qid", ""), "text": query},
                             "candidates": [{"docid": p.id, "score": p.relevance, "doc": {"id": p.id,
                                                                                           "contents": p.text}}
                                            for p in answer.passages]})

    async def pyserini_document(request: Request) -> Response:
        name, docid = request.path_params["index"], request.path_params["docid"]
        if name not in engine.configs:
            return JSONResponse({"detail": f"index {name!r} is not served here; served: {', '.join(engine.configs)}"},
                                status_code=404)
        try:
            if request.query_params:
                raise BadQuestion(f"unknown parameter(s) {', '.join(sorted(request.query_params))}")
            docid = check_text(docid, "docid", 200)
            future = engine.queue.submit(lambda: engine.passage_text(docid))
            text = await asyncio.wait_for(asyncio.wrap_future(future), engine.queue.max_wait or None)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
            return _error_response(exc, "pyserini")
        if text is None:
            return JSONResponse({"detail": f"Document {docid} not found in index {name}"}, status_code=404)
        return JSONResponse({"docid": docid, "text": {"id": docid, "contents": text}})

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
                narrow = _flag(given.get("narrow"), "narrow")
                # the page's aspect field is always sent: empty means "the question's own", as for the objects
                aspect = _aspect(given) or None
                answer = await _answer(engine, question, objects, given.get("config") or None,
                                       _k(given.get("k"), PAGE_K, PAGE_MAX_K), aspect)
                context["answer"] = answer.narrowed() if narrow else answer
                context["whole"] = answer
                context["narrow"] = narrow
                context["back"] = str(request.url.path) + ("?" + request.url.query if request.url.query else "")
        except Exception as exc:  # noqa: BLE001 - the page shows a note instead of a traceback
            status, context["error"] = _error_status(exc)
            headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else None
            return templates.TemplateResponse(request, "page.html", context, status_code=status, headers=headers)
        return templates.TemplateResponse(request, "page.html", context, status_code=status)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        allowed = "POST" if request.url.path == "/api/feedback" else "GET"
        message = {404: f"no such page: {request.url.path}", 405: f"method {request.method} is not allowed here; "
                   f"use {allowed}"}.get(status, "error")
        if request.url.path.startswith("/v1/"):
            return JSONResponse({"detail": message}, status_code=status)
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
        Route("/api/feedback", api_feedback, methods=["POST"]),
        Route("/api/docs", api_page, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/v1/indexes/{index}/search", pyserini_search, methods=["GET"]),
        Route("/v1/indexes/{index}/documents/{docid:path}", pyserini_document, methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    handlers: Mapping[Any, Any] = {404: not_found, 405: not_found, 500: server_error}
    return security_headers(Starlette(routes=routes, exception_handlers=dict(handlers)))
