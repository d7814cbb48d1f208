"""pyserini's REST shape (``pyserini/server/rest/routes/indexes.py`` and its search controller), so that a client
written for pyserini's server (rank_llm's, for one) works against ``kueri serve``: an *index* is a configuration
offered, and a query is ranked as a question, exactly as ``/api/search`` ranks it. Errors are pyserini's (FastAPI's)
``{"detail": ...}``.

    GET /v1/indexes[/]?index_type=...       the indexes served (configurations), as a list of names
    GET /v1/indexes/{index}/search?query=   the hits: {"query": {"qid", "text"}, "candidates": [...]}
    GET /v1/indexes/{index}/documents/{id}  a passage: {"docid", "text": {"id", "contents"}}
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kueri.config import RunConfig
from kueri.serve.checks import (
    MAX_ID,
    MAX_K,
    MAX_QUESTION,
    PAGE_K,
    PYSERINI_PARAMETERS,
    BadQuestion,
    check_text,
    known_parameters,
    whole_number,
)
from kueri.serve.engine import Engine
from kueri.serve.responses import error_body, error_response

#: pyserini's kinds of index (its ``index_type``): an inverted index (``tf``), Lucene's vectors (``lucene_hnsw``,
#: ``lucene_flat``), learned sparse (``impact``), Faiss.
INDEX_TYPES = ("tf", "lucene_flat", "lucene_hnsw", "impact", "faiss")
INDEXES_PARAMETERS = ("index_type",)


def index_types(config: RunConfig) -> set[str]:
    """The kinds of index (:data:`INDEX_TYPES`) ``config``'s first stage searches: the inverted index, the dense
    vectors (HNSW, or every vector with ``dense_exact``), or both (a hybrid)."""
    dense = {"lucene_flat" if config.dense_exact else "lucene_hnsw"} if config.dense else set()
    return dense | ({"tf"} if not config.dense or config.hybrid else set())


def _engine(request: Request) -> Engine:
    return request.app.state.engine


def _not_served(engine: Engine, name: str) -> Response | None:
    """pyserini's 404 for an index that is not a configuration offered here (None: it is one)."""
    if name in engine.configs:
        return None
    return JSONResponse(error_body(404, f"index {name!r} is not served here; served: {', '.join(engine.configs)}",
                                   "pyserini"), status_code=404)


async def indexes(request: Request) -> Response:
    """``GET /v1/indexes/``: the names of the indexes served, the configurations offered (the default first); with
    ``index_type``, those whose first stage searches that kind of index."""
    engine = _engine(request)
    try:
        given = known_parameters(request.query_params, INDEXES_PARAMETERS)
        kind = given.get("index_type")
        if kind is not None and kind not in INDEX_TYPES:
            raise BadQuestion(f"index_type must be one of {', '.join(INDEX_TYPES)}, not {kind[:20]!r}")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        return error_response(exc, "pyserini")
    return JSONResponse([name for name, config in engine.configs.items()
                         if kind is None or kind in index_types(config)])


async def search(request: Request) -> Response:
    """``GET /v1/indexes/{index}/search``: the configuration named ``index`` ranking the query as a question."""
    engine, name = _engine(request), request.path_params["index"]
    try:
        given = known_parameters(request.query_params, PYSERINI_PARAMETERS)
        refused = _not_served(engine, name)
        if refused is not None:
            return refused
        query = check_text(given.get("query", ""), "query", MAX_QUESTION)
        found = await engine.answer(query, None, name, whole_number(given.get("hits"), PAGE_K, MAX_K, "hits"))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        return error_response(exc, "pyserini")
    return JSONResponse({"query": {"qid": given.get("qid", ""), "text": query},
                         "candidates": [{"docid": p.id, "score": p.relevance, "doc": _raw(p.id, p.text)}
                                        for p in found.passages]})


async def document(request: Request) -> Response:
    """``GET /v1/indexes/{index}/documents/{docid}``: a passage's stored text."""
    engine, name, docid = _engine(request), request.path_params["index"], request.path_params["docid"]
    refused = _not_served(engine, name)
    if refused is not None:
        return refused
    try:
        if request.query_params:
            raise BadQuestion(f"unknown parameter(s) {', '.join(sorted(request.query_params))}")
        docid = check_text(docid, "docid", MAX_ID)
        text = await engine.passage(docid)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
        return error_response(exc, "pyserini")
    if text is None:
        return JSONResponse(error_body(404, f"Document {docid} not found in index {name}", "pyserini"),
                            status_code=404)
    return JSONResponse({"docid": docid, "text": _raw(docid, text)})


def _raw(docid: str, text: str) -> dict[str, Any]:
    """What pyserini returns of a JSON-collection index's passage: its stored ``raw``."""
    return {"id": docid, "contents": text}
