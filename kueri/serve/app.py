"""The web face of ``kueri serve``: a page and a JSON API over one :class:`~kueri.serve.engine.Engine`.

Starlette (an ASGI framework) on uvicorn, Jinja2 templates; docs/serve.md gives the measurements behind the
choice. The page is rendered on the server from plain forms, so it works with JavaScript off; its one
stylesheet is served from here: nothing is loaded from outside the server (the Content-Security-Policy
says so to the browser too).

    GET  /                                      the page (q, first, second, aspect, narrow, k, config)
    GET  /api/search?q=...&k=...                the answer as JSON (objects, config, aspect, narrow, format)
    GET  /api/health                            whether it is ready, the corpus size, the queue
    POST /api/feedback                          a reader's "useful" / "not useful" for a passage
    GET  /v1/indexes, /v1/indexes/{config}/...  pyserini's REST shape (:mod:`kueri.serve.pyserini`)
    GET  /openapi.json, /api/docs               the OpenAPI 3 document, and as a page
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from kueri.serve import pyserini
from kueri.serve.answer import Answer, run_lines
from kueri.serve.checks import (
    API_PARAMETERS,
    MAX_BODY,
    MAX_K,
    MAX_OBJECT,
    MAX_QUESTION,
    PAGE_K,
    PAGE_MAX_K,
    PAGE_PARAMETERS,
    BadQuestion,
    answer_format,
    aspect_of,
    check_text,
    flag,
    known_parameters,
    parse_objects,
    whole_number,
)
from kueri.serve.engine import Engine
from kueri.serve.feedback import FORM_FIELDS, BadFeedback, FeedbackLog
from kueri.serve.openapi import document
from kueri.serve.responses import error_body, error_headers, error_status

HERE = Path(__file__).resolve().parent
#: Every response: nothing from elsewhere (scripts, styles, frames, forms), no framing of the page by others.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                                 b"base-uri 'none'; form-action 'self'; object-src 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
FEEDBACK_PATH = "/api/feedback"


async def search_json(engine: Engine, query: Mapping[str, str], feedback: FeedbackLog | None = None
                      ) -> tuple[int, dict[str, Any]]:
    """``/api/search``: the status and the JSON body of the answer to a query's parameters (a 400 names the bad
    one; every failure is a JSON error and the server keeps serving)."""
    status, body, _, _ = await _search(engine, query, feedback)
    return status, body


async def _search(engine: Engine, query: Mapping[str, str], feedback: FeedbackLog | None
                  ) -> tuple[int, dict[str, Any], Answer | None, dict[str, str] | None]:
    """The status, JSON body, answer (None: a failure) and headers of ``/api/search``'s answer to ``query``."""
    try:
        given = known_parameters(query, API_PARAMETERS)
        question = check_text(given.get("q", ""), "question", MAX_QUESTION)
        objects = parse_objects(given["objects"]) if given.get("objects") else None
        answer_format(given.get("format"))
        narrow = flag(given.get("narrow"), "narrow")
        found = await engine.answer(question, objects, given.get("config") or None,
                             whole_number(given.get("k"), PAGE_K, MAX_K), aspect_of(given))
        found = await _identified(found.narrowed() if narrow else found, feedback)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        status, message = error_status(exc)
        return status, error_body(status, message), None, error_headers(exc)
    return 200, found.as_json(), found, None


async def _identified(found: Answer, feedback: FeedbackLog | None) -> Answer:
    """The answer as shown, with its id: recorded (off the event loop: a line written and flushed to disk), so a
    judgment of one of its passages can be checked (:mod:`kueri.serve.feedback`). Without feedback, no id."""
    if feedback is None:
        return found
    return dataclasses.replace(found, id=await asyncio.to_thread(feedback.answered, found))


def _download(name: str, kind: str) -> dict[str, str]:
    return {"Content-Disposition": f'attachment; filename="{name}.{kind}"'}


def _file_name(found: Answer) -> str:
    words = "-".join("".join(c if c.isalnum() else " " for c in found.question.lower()).split()[:8])
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


def _judgment_fields(request: Request, data: bytes) -> tuple[dict[str, Any], str | None]:
    """A feedback request's fields by their JSON names (checked by :meth:`FeedbackLog.record`), and where to send
    the reader back to (a form from the page)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    try:
        if kind == "application/json":
            fields = json.loads(data.decode("utf-8"))
            if not isinstance(fields, dict):
                raise ValueError("not an object")
            return fields, None
        if kind == "application/x-www-form-urlencoded":
            form = {k: v[-1] for k, v in urllib.parse.parse_qs(data.decode("utf-8"), strict_parsing=False).items()}
            unknown = sorted(set(form) - set(FORM_FIELDS))
            if unknown:
                raise BadFeedback(f"unknown field(s) {', '.join(unknown)[:100]}; known: {', '.join(FORM_FIELDS)}")
            if form.get("useful") not in ("yes", "no"):
                raise BadFeedback("useful must be yes or no")
            back = form.get("back") or "/"
            if not back.startswith("/") or back.startswith("//"):
                back = "/"  # only back to this server's page
            return {"answer": form.get("answer"), "passage": form.get("id"), "useful": form["useful"] == "yes"}, back
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadFeedback(f"the request is not valid JSON or form data ({exc})") from None
    raise BadFeedback("send the judgment as application/json or a form (application/x-www-form-urlencoded)")


# -- the routes (each reads the engine, the feedback log and the templates from the application's state) -------

async def api_search(request: Request) -> Response:
    engine = request.app.state.engine
    status, body, found, headers = await _search(engine, request.query_params, request.app.state.feedback)
    if found is None:
        return JSONResponse(body, status_code=status, headers=headers)
    kind = request.query_params.get("format")  # a format asked for is a download
    if kind == "run":
        return PlainTextResponse("".join(run_lines(found)), headers=_download(_file_name(found), "txt"))
    return JSONResponse(body, headers=_download(_file_name(found), "json") if kind else None)


async def api_health(request: Request) -> Response:
    return JSONResponse({**request.app.state.engine.health(), "feedback": request.app.state.feedback is not None})


async def api_feedback(request: Request) -> Response:
    feedback: FeedbackLog | None = request.app.state.feedback
    if feedback is None:
        return JSONResponse(error_body(404, "feedback is off on this server (kueri serve --no-feedback)"),
                            status_code=404)
    try:
        fields, back = _judgment_fields(request, await _body(request))
        await asyncio.to_thread(feedback.record, fields)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        status, message = error_status(exc)
        if "larger than" in message:
            status = 413
        return JSONResponse(error_body(status, message), status_code=status)
    if back is not None:
        return RedirectResponse(back, status_code=303)
    return JSONResponse({"recorded": True})


async def openapi(request: Request) -> Response:
    return JSONResponse(document(list(request.app.state.engine.configs)))


async def api_page(request: Request) -> Response:
    engine = request.app.state.engine
    return request.app.state.templates.TemplateResponse(request, "api.html", {"spec": document(list(engine.configs)),
                                                                              "engine": engine})


async def page(request: Request) -> Response:
    engine, templates = request.app.state.engine, request.app.state.templates
    context: dict[str, Any] = {"engine": engine, "form": {}, "answer": None, "error": None}
    try:
        given = known_parameters(request.query_params, PAGE_PARAMETERS)
        context["form"] = given
        if "q" in given:
            question = check_text(given["q"], "question", MAX_QUESTION)
            first, second = given.get("first", "").strip(), given.get("second", "").strip()
            if bool(first) != bool(second):
                raise BadQuestion("name both objects, or leave both empty to have them found in the question")
            objects = parse_objects(f"{first},{second}") if first else None
            narrow = flag(given.get("narrow"), "narrow")
            # the page's aspect field is always sent: empty means "the question's own", as for the objects
            found = await engine.answer(question, objects, given.get("config") or None,
                                 whole_number(given.get("k"), PAGE_K, PAGE_MAX_K), aspect_of(given) or None)
            shown = await _identified(found.narrowed() if narrow else found, request.app.state.feedback)
            context.update(answer=shown, whole=found, narrow=narrow,
                           back=str(request.url.path) + ("?" + request.url.query if request.url.query else ""))
    except Exception as exc:  # noqa: BLE001 - the page shows a note instead of a traceback
        status, context["error"] = error_status(exc)
        return templates.TemplateResponse(request, "page.html", context, status_code=status,
                                          headers=error_headers(exc))
    return templates.TemplateResponse(request, "page.html", context)


async def not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    allowed = "POST" if request.url.path == FEEDBACK_PATH else "GET"
    message = {404: f"no such page: {request.url.path}", 405: f"method {request.method} is not allowed here; "
               f"use {allowed}"}.get(status, "error")
    if request.url.path.startswith("/v1/"):
        return JSONResponse(error_body(status, message, "pyserini"), status_code=status)
    if request.url.path.startswith("/api/"):
        return JSONResponse(error_body(status, message), status_code=status)
    return request.app.state.templates.TemplateResponse(
        request, "page.html", {"engine": request.app.state.engine, "form": {}, "answer": None, "error": message},
        status_code=status)


async def server_error(request: Request, exc: Exception) -> Response:
    status, message = error_status(exc)
    return JSONResponse(error_body(status, message), status_code=status)


ROUTES = [
    Route("/", page, methods=["GET"]),
    Route("/api/search", api_search, methods=["GET"]),
    Route("/api/health", api_health, methods=["GET"]),
    Route(FEEDBACK_PATH, api_feedback, methods=["POST"]),
    Route("/api/docs", api_page, methods=["GET"]),
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/v1/indexes", pyserini.indexes, methods=["GET"]),
    Route("/v1/indexes/", pyserini.indexes, methods=["GET"]),  # as pyserini's own server writes it
    Route("/v1/indexes/{index}/search", pyserini.search, methods=["GET"]),
    Route("/v1/indexes/{index}/documents/{docid:path}", pyserini.document, methods=["GET"]),
    Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
]


def create_app(engine: Engine, feedback: FeedbackLog | None = None) -> Any:
    """The ASGI application over ``engine`` (started or not: /api/health says which); ``feedback``: where
    readers' judgments go (None: feedback is off)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(max_question=MAX_QUESTION, max_object=MAX_OBJECT, page_k=PAGE_K,
                                 page_max_k=PAGE_MAX_K, feedback=feedback is not None)
    app = Starlette(routes=ROUTES, exception_handlers={404: not_found, 405: not_found, 500: server_error})
    app.state.engine, app.state.feedback, app.state.templates = engine, feedback, templates
    return security_headers(app)
