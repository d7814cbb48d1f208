#!/usr/bin/env python3
"""Starlette or FastAPI for kueri serve: import and start time, requests/s and latency of the real endpoints.

    .venv/bin/python benchmarks/bench_frameworks.py [--corpus PATH] [--requests 2000] [--clients 16] [--repeat 3]

Each framework serves kueri's engine on uvicorn in a process of its own: Starlette with kueri's application
(:func:`kueri.serve.app.create_app`), FastAPI with the same endpoints written as FastAPI routes over the
same function (:func:`kueri.serve.app.search_json`). The ranking is the same code under both; what
differs is the part around it, so the load is what that part costs most on: ``/api/health`` and
``/api/search`` of a question answered from the answer cache (k=10, 10 passages with their texts as
JSON), ``--requests`` each, by ``--clients`` threads on keep-alive connections. Also timed: importing the
framework and uvicorn in a fresh interpreter (median of 5), and the process's start to ready (the JVM, the
models and one warm-up question: the same work under both).
"""


import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from bench_serve import Server, ask_all, summary

from kueri import resources
from kueri.cli.script import run_script, script_parser

IMPORTS = {
    "starlette": "import uvicorn, jinja2, starlette.applications, starlette.routing, starlette.templating",
    "fastapi": "import uvicorn, jinja2, fastapi, fastapi.responses, starlette.templating",
}
QUESTION = "Which is better, a laptop or a desktop?"


def fastapi_app(engine):  # noqa: ANN001, ANN201 - the benchmark's second framework, not part of kueri
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from kueri.serve.app import search_json

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/api/search")
    async def search(request: Request) -> JSONResponse:
        status, body = await search_json(engine, request.query_params)
        return JSONResponse(body, status_code=status)

    @app.get("/api/health")
    async def health() -> JSONResponse:
        return JSONResponse(engine.health())

    return app


def child(framework: str, corpus: str, workdir: str) -> None:
    """Serve kueri's engine with ``framework`` on a free port of 127.0.0.1 (prints ``ready at ...``)."""
    import uvicorn

    from kueri.serve.engine import Engine, known_topics
    from kueri.serve.server import bind

    sock = bind("127.0.0.1", 0)
    engine = Engine(corpus=corpus, workdir=workdir, topics=known_topics([resources.sample() / "topics.xml"]))
    engine.start(preembed=False)
    if framework == "starlette":
        from kueri.serve.app import create_app

        app = create_app(engine)
    else:
        app = fastapi_app(engine)
    sock.listen(2048)
    print(f"ready at http://127.0.0.1:{sock.getsockname()[1]}/", file=sys.stderr, flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
    finally:
        engine.close()


def import_seconds(framework: str, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", IMPORTS[framework]], check=True)
        times.append(time.perf_counter() - started)
    python_alone = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_alone.append(time.perf_counter() - started)
    return statistics.median(times) - statistics.median(python_alone)


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--corpus", default=str(resources.sample() / "passages.jsonl.gz"))
    parser.add_argument("--workdir", default="/tmp/kueri-bench-frameworks")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="load rounds per framework (medians reported)")
    parser.add_argument("--child", choices=list(IMPORTS), help=argparse_hidden())
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.corpus, args.workdir)
        return 0
    search = "/api/search?" + urllib.parse.urlencode({"q": QUESTION, "k": 10})
    print("| framework | import s | start to ready s | endpoint | requests/s | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for framework in IMPORTS:
        imported = import_seconds(framework)
        command = [sys.executable, str(Path(__file__).resolve()), "--child", framework, "--corpus", args.corpus,
                   "--workdir", args.workdir]
        with Server(command) as server:
            ask_all(server, [search] * 50, 4)  # the answer in the cache, connections and code paths warm
            for name, path in (("/api/health", "/api/health"), ("/api/search (cached)", search)):
                rounds = [summary(*ask_all(server, [path] * args.requests, args.clients)) for _ in range(args.repeat)]
                per_second = statistics.median(r["per_second"] for r in rounds)
                p50 = statistics.median(r["p50"] for r in rounds) * 1000
                p95 = statistics.median(r["p95"] for r in rounds) * 1000
                print(f"| {framework} | {imported:.2f} | {server.started_seconds:.1f} | {name} | {per_second:.0f} | "
                      f"{p50:.1f} | {p95:.1f} |", flush=True)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    run_script(main)
