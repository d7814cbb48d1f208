"""The OpenAPI 3 document of ``kueri serve`` (``/openapi.json``), written by hand from the routes in app.py.

Every endpoint, parameter and error status is here, with the limits, names and headers the routes use (imported,
never typed again); tests/test_serve_engine.py validates the document with openapi-spec-validator and checks that
it lists every route the application has. ``/api/docs`` renders it as a page on the server (no Swagger UI:
nothing is loaded from outside).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kueri import __version__
from kueri.records import STANCES
from kueri.serve.answer import SIDES
from kueri.serve.checks import FLAGS, FORMATS, MAX_BODY, MAX_ID, MAX_K, MAX_OBJECT, MAX_QUESTION, PAGE_K, PAGE_MAX_K
from kueri.serve.engine import EXPLAINED
from kueri.serve.feedback import ANSWER_ID
from kueri.serve.pyserini import INDEX_TYPES
from kueri.serve.queue import COSTS, RETRY_AFTER

_string = {"type": "string"}
_nullable_string = {"type": "string", "nullable": True}
_html = {"text/html": {"schema": _string}}
BUSY = ("the queue is full: the questions waiting already would keep this one longer than the server's limit "
        "(kueri serve --max-wait), or it waited that long; cached answers and bad requests are still answered")


def _error(description: str, schema: str = "Error", retry: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description,
                                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}
    if retry:
        response["headers"] = {RETRY_AFTER: {"description": "seconds after which the question is likely answered",
                                             "schema": {"type": "integer", "minimum": 1}}}
    return response


def _query(name: str, description: str, schema: dict[str, Any], required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


def _count(most: int, default: int | None = None) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": most, **({"default": default} if default else {})}


def _text(most: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": most}


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}


ERRORS = {"400": _error("a bad parameter; the message names it"), "404": _error("no such path"),
          "405": _error("another method than the one listed"),
          "500": _error("an error inside the ranking; the server keeps serving"), "503": _error(BUSY, retry=True)}
PYSERINI_ERRORS = {"400": _error("a bad parameter; the message names it", "Detail"),
                   "404": _error("no such index (a configuration offered) or document", "Detail"),
                   "500": _error("an error inside the ranking", "Detail"), "503": _error(BUSY, "Detail", retry=True)}
NARROW = _query("narrow", "only the passages that speak of the aspect", {"type": "string", "enum": list(FLAGS)})


def _page_and_api(config: dict[str, Any]) -> dict[str, Any]:
    """The page and kueri's own JSON endpoints; ``config``: the parameter naming a configuration offered."""
    return {
        "/": {"get": {
            "summary": "The page: a question's two sides, a summary per side, a verdict", "operationId": "page",
            "parameters": [_query("q", "the question", _text(MAX_QUESTION)),
                           _query("first", "the first object", _text(MAX_OBJECT)),
                           _query("second", "the second object", _text(MAX_OBJECT)),
                           _query("aspect", "the aspect (empty: the question's own)", _text(MAX_OBJECT)),
                           NARROW, _query("k", "passages shown", _count(PAGE_MAX_K, PAGE_K)), config],
            "responses": {"200": {"description": "the page", "content": _html},
                          "400": {"description": "the page with a note naming the bad parameter", "content": _html},
                          "503": {"description": BUSY, "content": _html}}}},
        "/api/search": {"get": {
            "summary": "A question's answer: its objects, aspect, passages, summaries and verdict",
            "operationId": "search",
            "parameters": [
                _query("q", f"the question (at most {MAX_QUESTION} characters of text)", _text(MAX_QUESTION), True),
                _query("k", "passages returned", _count(MAX_K, PAGE_K)),
                _query("objects", "the two objects, comma-separated (default: the topic's, or found in the "
                       "question)", {"type": "string", "example": "laptop,desktop"}),
                config,
                _query("aspect", "what the objects are compared on (default: found in the question; empty: none); "
                       "it marks the passages that speak of it and never changes the ranking", _text(MAX_OBJECT)),
                NARROW,
                _query("format", "json (default) or run (a Touché run file); either one given is sent as a "
                       "download", {"type": "string", "enum": list(FORMATS)})],
            "responses": {"200": {"description": "the answer", "content": {
                **_json("Answer"), "text/plain": {"schema": _string, "example": "q FIRST "
                                                  "clueweb12-0000tw-00-00000___1 1 2.5 kueri-default\n"}}},
                **ERRORS}}},
        "/api/health": {"get": {
            "summary": "Whether the server is ready, the corpus size, the configurations, the queue",
            "operationId": "health",
            "responses": {"200": {"description": "the state", "content": _json("Health")}, "404": ERRORS["404"],
                          "405": ERRORS["405"]}}},
        "/api/feedback": {"post": {
            "summary": "Record a reader's judgment (useful or not) of a passage an answer showed, with what it "
                       "showed, in the work folder's feedback.jsonl",
            "operationId": "feedback",
            "requestBody": {"required": True, "content": {
                **_json("Feedback"),
                "application/x-www-form-urlencoded": {"schema": {"$ref": "#/components/schemas/FeedbackForm"}}}},
            "responses": {"200": {"description": "recorded (a JSON request)", "content": {"application/json": {
                "schema": {"type": "object", "properties": {"recorded": {"type": "boolean"}}}}}},
                          "303": {"description": "recorded (the page's form): back to the page"},
                          "400": _error("not a judgment of a passage an answer of this server showed (an unknown "
                                        "answer id or passage, a bad or unknown field); the message says which"),
                          "404": _error("feedback is off (kueri serve --no-feedback)"),
                          "405": ERRORS["405"], "413": _error(f"the request is larger than {MAX_BODY // 1000} kB")}}},
    }


def _pyserini(configs: Sequence[str]) -> dict[str, Any]:
    """pyserini's REST shape (:mod:`kueri.serve.pyserini`): an index is a configuration offered."""
    index = {"name": "index", "in": "path", "required": True, "schema": {"type": "string", "enum": list(configs)},
             "description": "a configuration offered by this server, as pyserini names an index"}
    listing = {
        "summary": "pyserini's REST index list: the configurations offered, the default first",
        "parameters": [_query("index_type", "only the indexes of this kind, as pyserini names them: the first stage "
                              "searches an inverted index (tf) or dense vectors (lucene_hnsw, lucene_flat)",
                              {"type": "string", "enum": list(INDEX_TYPES)})],
        "responses": {"200": {"description": "the index names", "content": _json("PyseriniIndexes")},
                      "400": PYSERINI_ERRORS["400"]}}
    return {
        "/v1/indexes": {"get": {**listing, "operationId": "pyseriniIndexes"}},
        "/v1/indexes/": {"get": {**listing, "summary": listing["summary"] + " (the path as pyserini writes it)",
                                 "operationId": "pyseriniIndexesSlash"}},
        "/v1/indexes/{index}/search": {"get": {
            "summary": "pyserini's REST search: the configuration's ranking of a query, in pyserini's JSON shape",
            "operationId": "pyseriniSearch",
            "parameters": [index, _query("query", "the query (a question)", _text(MAX_QUESTION), True),
                           _query("hits", "hits returned", _count(MAX_K, PAGE_K)),
                           _query("qid", "a query id, echoed back", {"type": "string", "default": ""})],
            "responses": {"200": {"description": "the hits", "content": _json("PyseriniHits")}, **PYSERINI_ERRORS}}},
        "/v1/indexes/{index}/documents/{docid}": {"get": {
            "summary": "pyserini's REST document: a passage by id", "operationId": "pyseriniDocument",
            "parameters": [index, {"name": "docid", "in": "path", "required": True, "schema": _text(MAX_ID),
                                   "description": "a passage id"}],
            "responses": {"200": {"description": "the passage", "content": _json("PyseriniDocument")},
                          **PYSERINI_ERRORS}}},
    }


DOCUMENTS = {
    "/openapi.json": {"get": {
        "summary": "This document", "operationId": "openapi",
        "responses": {"200": {"description": "OpenAPI 3.0", "content": {"application/json": {
            "schema": {"type": "object"}}}}}}},
    "/api/docs": {"get": {
        "summary": "This document as a page", "operationId": "apiPage",
        "responses": {"200": {"description": "the page", "content": _html}}}},
    "/static/{file}": {"get": {
        "summary": "The page's stylesheet", "operationId": "static",
        "parameters": [{"name": "file", "in": "path", "required": True, "schema": _string,
                        "description": "kueri.css"}],
        "responses": {"200": {"description": "the file", "content": {"text/css": {"schema": _string}}},
                      "404": {"description": "no such file"}}}},
}


def document(configs: Sequence[str]) -> dict[str, Any]:
    """The OpenAPI 3.0 document; ``configs``: the configurations offered (the pyserini-shaped index names)."""
    config = _query("config", "the configuration (default: the first offered)",
                    {"type": "string", "enum": list(configs)})
    return {
        "openapi": "3.0.3",
        "info": {"title": "kueri serve", "version": __version__,
                 "description": "Comparative argument retrieval: a question's passages for each of its two objects, "
                 "ranked by the same pipeline as `kueri run`. Every error is JSON with a one-line message."},
        "paths": {**_page_and_api(config), **_pyserini(configs), **DOCUMENTS},
        "components": {"schemas": SCHEMAS},
    }


_sentences = {"type": "array", "items": {"$ref": "#/components/schemas/SummarySentence"}}
SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error", "status"],
              "properties": {"error": _string, "status": {"type": "integer"}}},
    "Detail": {"type": "object", "required": ["detail"], "description": "pyserini's (FastAPI's) error shape",
               "properties": {"detail": _string}},
    "Passage": {"type": "object", "properties": {
        "rank": {"type": "integer"}, "id": _string, "stance": {"type": "string", "enum": list(STANCES)},
        "relevance": {"type": "number"},
        "quality": {"type": "number", "nullable": True, "description": "the argument quality, 0 to 1: the "
                    "configuration's quality stage's, else the offline model's (none: its source has no score)"},
        "url": _nullable_string, "text": _string, "about_aspect": {"type": "boolean"},
        "deciding_sentence": {"type": "string", "nullable": True,
                              "description": "the sentence that decided the stance (none: no object named, "
                                             f"or ranked below {EXPLAINED})"}}},
    "SummarySentence": {"type": "object", "properties": {"text": _string, "rank": {"type": "integer"}, "id": _string}},
    "Answer": {"type": "object", "properties": {
        "answer_id": {"type": "string", "nullable": True, "description": "what a judgment of one of its passages "
                      "names (POST /api/feedback); valid across a restart; null when feedback is off"},
        "question": _string, "comparative": {"type": "boolean", "description": "whether the question asks for a "
                                             "choice between two objects; answered either way"},
        "objects": {"type": "array", "items": _string, "minItems": 2, "maxItems": 2, "nullable": True},
        "objects_from": _string, "aspect": _nullable_string,
        "aspect_from": {"type": "string", "enum": ["extracted", "given", "none"]},
        "topic": _nullable_string, "config": _string, "config_summary": _string, "hits": {"type": "integer"},
        "k": {"type": "integer"},
        "evidence": {"type": "object", "nullable": True, "description": "weak: none of the top passages scores the "
                     "threshold learned on the Touché 2020/2021 judgments (docs/serve.md)", "properties": {
                         "weak": {"type": "boolean"}, "best_score": {"type": "number", "nullable": True},
                         "threshold": {"type": "number"}, "depth": {"type": "integer"}}},
        "verdict": {"type": "object", "properties": {
            "depth": {"type": "integer"}, "counts": {"type": "object"}, "weights": {"type": "object"},
            "first_share": {"type": "number", "nullable": True},
            "leaning": {"type": "string", "enum": [*SIDES.values(), "balanced", "none"]},
            "confident": {"type": "boolean", "description": "false: the corpus holds little on the question"}}},
        "summaries": {"type": "object", "properties": {name: _sentences for name in SIDES.values()}},
        "passages": {"type": "array", "items": {"$ref": "#/components/schemas/Passage"}},
        "seconds": {"type": "number"}, "note": _string}},
    "Health": {"type": "object", "properties": {
        "status": {"type": "string", "enum": ["ok", "starting"]}, "passages": {"type": "integer", "nullable": True},
        "configs": {"type": "array", "items": _string}, "default_config": _string,
        "uptime_seconds": {"type": "number"}, "questions_ranked": {"type": "integer"}, "waiting": {"type": "integer"},
        "waiting_by_cost": {"type": "object", "description": "questions waiting, by expected cost (the cheaper go "
                            "first)", "properties": {kind: {"type": "integer"} for kind in COSTS}},
        "preembedded": {"type": "integer"}, "max_wait_seconds": {"type": "number"},
        "question_seconds": {"type": "number", "description": "what a cold question is expected to cost"},
        "seconds_by_cost": {"type": "object", "description": "what a question of each kind is expected to cost",
                            "properties": {kind: {"type": "number"} for kind in COSTS}},
        "measured_costs": {"type": "array", "items": {"type": "string", "enum": list(COSTS)},
                           "description": "the kinds measured by this server (the others: the start's figures)"},
        "feedback": {"type": "boolean"}}},
    "Feedback": {"type": "object", "required": ["answer", "passage", "useful"], "additionalProperties": False,
                 "properties": {
                     "answer": {"type": "string", "pattern": f"^{ANSWER_ID.pattern}$",
                                "description": "the answer_id of the response (or page) that showed the passage"},
                     "passage": {"type": "string", "description": "the passage's id, as that answer showed it"},
                     "useful": {"type": "boolean"}}},
    "FeedbackForm": {"type": "object", "required": ["answer", "id", "useful"], "additionalProperties": False,
                     "properties": {"answer": _string, "id": _string,
                                    "useful": {"type": "string", "enum": ["yes", "no"]}, "back": _string}},
    "PyseriniIndexes": {"type": "array", "items": _string, "description": "index names (configurations offered)"},
    "PyseriniHits": {"type": "object", "required": ["query", "candidates"], "properties": {
        "query": {"type": "object", "properties": {"qid": _string, "text": _string}},
        "candidates": {"type": "array", "items": {"$ref": "#/components/schemas/PyseriniCandidate"}}}},
    "PyseriniCandidate": {"type": "object", "required": ["docid", "score", "doc"], "properties": {
        "docid": _string, "score": {"type": "number"}, "doc": {"$ref": "#/components/schemas/PyseriniRaw"}}},
    "PyseriniRaw": {"type": "object", "properties": {"id": _string, "contents": _string}},
    "PyseriniDocument": {"type": "object", "required": ["docid", "text"], "properties": {
        "docid": _string, "text": {"$ref": "#/components/schemas/PyseriniRaw"}}},
}
