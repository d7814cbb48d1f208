"""kueri serve without a server: input checks, the verdict, source links, and the command's one-line errors."""

from __future__ import annotations

import gzip
import json
import re
import socket
import sys
import urllib.parse

import pytest

from kueri.config import get_config
from kueri.records import Topic
from kueri.runcontext import RunContext
from kueri.serve.answer import Answer, Passage, Verdict
from kueri.serve.cache import AnswerCache
from kueri.serve.checks import MAX_QUESTION, BadQuestion, check_text, parse_objects
from kueri.serve.links import SourceLinks, chatnoir_url
from kueri.serve.topics import without_objects
from kueri.stages import Cost
from tests.conftest import SAMPLE_CORPUS
from tests.conftest import run_command as run


@pytest.mark.parametrize(("text", "message"), [
    ("", "the question is empty"),
    ("  \n\t ", "the question is empty"),
    ("x" * (MAX_QUESTION + 1), f"is {MAX_QUESTION + 1} characters long; at most {MAX_QUESTION}"),
    ("laptop\x00desktop", "binary data or control characters"),
    ("caf\ufffd or tea", "binary data or control characters"),  # what undecodable bytes in a URL become
    ("\x1b[31mred", "binary data or control characters"),
])
def test_bad_questions_are_refused_with_a_reason(text, message):
    with pytest.raises(BadQuestion, match=message.replace("[", r"\[")):
        check_text(text, "question", MAX_QUESTION)


def test_a_good_question_keeps_its_words_and_loses_extra_spaces():
    assert check_text("  Which is  better,\ta laptop or a desktop? ", "question", MAX_QUESTION) == \
        "Which is better, a laptop or a desktop?"
    assert check_text("x" * MAX_QUESTION, "question", MAX_QUESTION) == "x" * MAX_QUESTION


@pytest.mark.parametrize(("text", "ok"), [("laptop, desktop", ("laptop", "desktop")), ("a,b,c", None), ("a", None),
                                          ("a, ", None), ("x" * 101 + ",b", None)])
def test_objects_are_two_names(text, ok):
    if ok:
        assert parse_objects(text) == ok
    else:
        with pytest.raises(BadQuestion):
            parse_objects(text)


def passage(rank: int, stance: str) -> Passage:
    return Passage(rank, f"p{rank}", stance, 1.0 / rank, 0.5, "text", None, ())


def test_the_verdict_counts_stances_and_weighs_them_by_rank():
    verdict = Verdict.of([passage(1, "FIRST"), passage(2, "SECOND"), passage(3, "SECOND"), passage(4, "NEUTRAL"),
                          passage(5, "NO")])
    assert verdict.counts == {"FIRST": 1, "SECOND": 2, "NEUTRAL": 1, "NO": 1}
    assert verdict.weights["FIRST"] == 1.0 and verdict.weights["SECOND"] == round(1 / 1.5849625 + 0.5, 4)
    assert verdict.first_share == round(1 / (1 + 1 / 1.5849625007 + 0.5), 4) and verdict.leaning == "balanced"
    assert Verdict.of([passage(1, "SECOND"), passage(2, "FIRST")]).leaning == "second"
    assert Verdict.of([passage(1, "NO")]).leaning == "none" and Verdict.of([]).first_share is None


def test_pieces_cut_the_text_at_the_object_mentions():
    text = "A laptop beats a desktop."
    p = Passage(1, "p", "FIRST", 1.0, 0.5, text, None, ((2, 8, "OBJ1"), (17, 24, "OBJ2")))
    assert p.pieces() == [("A ", None), ("laptop", "OBJ1"), (" beats a ", None), ("desktop", "OBJ2"), (".", None)]


def test_source_links_are_the_corpus_chatnoir_urls():
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        passages = [json.loads(line) for line in handle]
    links = SourceLinks.of_corpus(SAMPLE_CORPUS)
    assert len(passages) == 2607 and all(links.url(p["id"]) == p["chatNoirUrl"] for p in passages)
    # the id gives every URL the sample has; only the passages without one are held
    assert len(links.exceptions) == sum(p["chatNoirUrl"] is None for p in passages) == 126
    assert set(links.exceptions.values()) == {None}
    assert chatnoir_url("my-own-doc___1") is None


def test_without_objects_drops_the_stages_that_read_them():
    config = without_objects(get_config("default"))
    assert [stage.name for stage in config.stages()] == ["search"]
    assert not any(stage.needs_objects for stage in without_objects(get_config("row-15")).stages())


def test_the_command_says_in_one_line_when_the_index_is_missing(tmp_path):
    result = run([sys.executable, "-m", "kueri", "serve", "--index", str(tmp_path / "nowhere"), "--port", "0"])
    assert result.returncode == 2
    assert result.stderr.strip() == f"kueri: error: {tmp_path / 'nowhere'}: index not found"


def test_the_command_says_in_one_line_when_the_port_is_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run([sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", str(port),
                      "--workdir", str(tmp_path)])
    assert result.returncode == 2
    assert result.stderr.strip() == (f"kueri: error: port {port} on 127.0.0.1 is in use (another server?); pick "
                                     "another with --port")
    assert not list(tmp_path.iterdir())  # it stopped before any work


def test_the_command_refuses_a_configuration_that_needs_judgments(tmp_path):
    result = run([sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", "0",
                  "--config", "row-16", "--workdir", str(tmp_path)])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "configuration row-16 uses relevance judgments" in result.stderr


# -- the queue, the evidence, the summaries, the feedback file, the OpenAPI document (no server) ----------------

@pytest.fixture
def idle_engine(tmp_path):
    """An engine that was never started: its queue works, nothing is loaded."""
    from kueri.serve.engine import Engine

    engine = Engine(corpus=SAMPLE_CORPUS, workdir=tmp_path, max_wait=25)
    yield engine
    engine._queue.shutdown()


def test_a_question_the_queue_would_keep_too_long_is_refused_at_once(idle_engine):
    import threading

    from kueri.serve.queue import Busy

    release = threading.Event()
    idle_engine._queue.question_seconds = 10.0  # what questions cost lately
    first = idle_engine._queue.submit(lambda: release.wait(30), question=True)  # running
    second = idle_engine._queue.submit(lambda: 2, question=True)  # waits 10 s: 20 s in all, within 25
    with pytest.raises(Busy, match="would wait longer than 25 s") as refused:
        idle_engine._queue.submit(lambda: 3, question=True)  # 30 s
    assert refused.value.retry_after == 20
    other = idle_engine._queue.submit(lambda: "not a question")  # other work is not refused by the estimate
    release.set()
    assert first.result(timeout=30) is True and second.result(timeout=30) == 2 and other.result(timeout=30)
    assert idle_engine._queue.submit(lambda: 4, question=True).result(timeout=30) == 4  # the queue drained
    queue = idle_engine._queue
    assert queue.waiting == 0 and queue.waiting_by_cost() == {"cached": 0, "warm": 0, "cold": 0}


def test_a_warm_question_goes_before_the_cold_ones_that_wait(idle_engine):
    """One cold question runs and seven wait: a warm one asked then is answered before the seven, and a cached
    ranking (only passages to fill) before that; /api/health says how many of each wait."""
    import threading

    queue = idle_engine._queue
    queue.max_wait = 600  # not overloaded: every one is admitted
    queue.seconds.update(cached=0.1, warm=0.5, cold=10.0)
    release, started, answered = threading.Event(), threading.Event(), []
    running = queue.submit(lambda: started.set() or release.wait(30), question=True, cost="cold")
    started.wait(30)
    cold = [queue.submit(lambda i=i: answered.append(f"cold {i}"), question=True, cost="cold") for i in range(7)]
    warm = queue.submit(lambda: answered.append("warm"), question=True, cost="warm")
    cached = queue.submit(lambda: answered.append("cached"), question=True, cost="cached")
    health = idle_engine.health()
    assert health["waiting_by_cost"] == {"cached": 1, "warm": 1, "cold": 7} and health["waiting"] == 10
    assert health["seconds_by_cost"] == {"cached": 0.1, "warm": 0.5, "cold": 10.0}
    release.set()
    for future in [running, *cold, warm, cached]:
        future.result(timeout=30)
    assert answered == ["cached", "warm", *(f"cold {i}" for i in range(7))]


def test_questions_are_probed_on_the_pipeline_thread_before_the_next_ranking(idle_engine):
    """A question's kind is found by its probe, on the pipeline thread once the running ranking is done (Java is
    used from that thread only); a warm one then goes first, and a cold one that would wait too long is refused
    with a 503 (its future's Busy) once probed."""
    import threading

    from kueri.serve.queue import Busy

    queue = idle_engine._queue  # max_wait 25
    queue.seconds.update(warm=0.5, cold=10.0)
    release, started, answered, probed_on = threading.Event(), threading.Event(), [], set()
    running = queue.submit(lambda: started.set() or release.wait(30), question=True, cost="cold")
    started.wait(30)

    def probe(kind: str):
        return lambda: probed_on.add(threading.current_thread().name) or kind

    cold = [queue.submit(lambda cost, i=i: answered.append((f"cold {i}", cost)), question=True, probe=probe("cold"))
            for i in range(2)]
    warm = queue.submit(lambda cost: answered.append(("warm", cost)), question=True, probe=probe("warm"))
    late = queue.submit(lambda cost: answered.append(("late", cost)), question=True, probe=probe("cold"))
    assert queue.waiting_by_cost() == {"cached": 0, "warm": 4, "cold": 0}  # taken for warm until probed
    release.set()
    running.result(timeout=30)
    assert [future.result(timeout=30) for future in [*cold, warm]] == [None, None, None]
    with pytest.raises(Busy, match="would wait longer than 25 s"):  # two cold before it (20 s), its own 10 s
        late.result(timeout=30)
    assert answered == [("warm", "warm"), ("cold 0", "cold"), ("cold 1", "cold")]
    assert probed_on == {"kueri-pipeline"}


def test_a_cold_question_that_waited_long_goes_before_newer_warm_ones(idle_engine):
    """No starvation: a question that has waited half the limit less its own cost goes first, oldest first."""
    import threading
    import time

    queue = idle_engine._queue
    queue.max_wait = 4.0
    queue.seconds.update(warm=0.1, cold=1.0)
    release, started, answered = threading.Event(), threading.Event(), []
    running = queue.submit(lambda: started.set() or release.wait(30), question=True, cost="warm")
    started.wait(30)
    cold = queue.submit(lambda: answered.append("cold"), question=True, cost="cold")
    time.sleep(1.1)  # the cold one has waited 1.1 s: with its own 1 s, past half the 4 s limit
    warm = [queue.submit(lambda i=i: answered.append(f"warm {i}"), question=True, cost="warm") for i in range(3)]
    release.set()
    for future in [running, cold, *warm]:
        future.result(timeout=30)
    assert answered == ["cold", "warm 0", "warm 1", "warm 2"]


def test_the_admission_counts_only_the_work_that_goes_before(idle_engine):
    """With a cold question running and cold ones waiting up to the limit, a warm question is still admitted (it goes
    before them), a cold one is not."""
    import threading

    from kueri.serve.queue import Busy

    queue = idle_engine._queue  # max_wait 25
    queue.seconds.update(warm=0.5, cold=10.0)
    release = threading.Event()
    futures = [queue.submit(lambda: release.wait(30), question=True, cost="cold"),
               queue.submit(lambda: 1, question=True, cost="cold")]  # 10 s running, 10 waiting
    with pytest.raises(Busy, match="would wait longer than 25 s"):
        queue.submit(lambda: 2, question=True, cost="cold")
    futures.append(queue.submit(lambda: 3, question=True, cost="warm"))
    release.set()
    assert [future.result(timeout=30) for future in futures][1:] == [1, 3]


def test_the_cost_a_question_is_expected_to_take_follows_the_measured_ones(idle_engine):
    from kueri.serve.queue import QUESTION_SECONDS_AT_START

    idle_engine._queue.measured(60.0)  # the warm-up, which also loads the models: not measured
    assert idle_engine._queue.question_seconds == QUESTION_SECONDS_AT_START
    idle_engine._queue.measuring = True  # as after the start
    idle_engine._queue.question_seconds = 0.0
    idle_engine._queue.measured(8.0)
    assert idle_engine._queue.question_seconds == 8.0
    idle_engine._queue.measured(2.0)
    assert idle_engine._queue.question_seconds == 5.0
    idle_engine._queue.measured(0.3, "warm")  # each kind has its own estimate
    assert idle_engine._queue.seconds["warm"] == 0.4 and idle_engine._queue.question_seconds == 5.0
    assert idle_engine.health()["measured_costs"] == ["cold", "warm"]


def test_evidence_is_weak_when_none_of_the_top_passages_reaches_the_threshold():
    from kueri.serve.answer import Evidence

    assert Evidence.of([-0.5, -1.0, -2.0, 2.0], threshold=0.0).weak  # rank 4 is not read
    assert not Evidence.of([-0.5, 0.1, -2.0, -3.0], threshold=0.0).weak
    assert Evidence.of([], threshold=0.0).weak and Evidence.of([], threshold=0.0).best is None


def test_a_summary_takes_each_sides_best_sentences_from_its_own_passages():
    from kueri.serve.answer import summarise

    text1 = "Laptops are portable. A laptop is better because you can carry it to class every day. The end."
    text2 = "Desktops are cheaper than laptops for the same power, and easier to repair at home."
    passages = [Passage(1, "a", "FIRST", 2.0, 0.5, text1, None, ((0, 7, "OBJ1"), (24, 30, "OBJ1"))),
                Passage(2, "b", "SECOND", 1.5, 0.5, text2, None, ((0, 8, "OBJ2"), (36, 43, "OBJ1"))),
                Passage(3, "c", "NEUTRAL", 1.0, 0.5, "Neutral words about laptops and desktops here.", None, ())]
    first = summarise(passages, "FIRST", [])
    assert [(s.text, s.rank, s.id) for s in first] == [
        ("A laptop is better because you can carry it to class every day.", 1, "a")]
    second = summarise(passages, "SECOND", ["cheap"])
    assert [s.rank for s in second] == [2] and second[0].text.startswith("Desktops are cheaper")
    assert summarise(passages[2:], "FIRST", []) == []


def test_feedback_lines_are_whole_json_even_after_a_torn_line(tmp_path):
    from kueri.serve.feedback import JsonLines

    lines = JsonLines(tmp_path / "feedback.jsonl", 10_000, 2)
    lines.append({"passage": "p1", "useful": True})
    with (tmp_path / "feedback.jsonl").open("a") as handle:
        handle.write('{"question": "torn by a cra')  # a crash in the middle of a write
    lines.append({"passage": "p2", "useful": False})
    written = (tmp_path / "feedback.jsonl").read_text().splitlines()
    assert len(written) == 3 and json.loads(written[0])["passage"] == "p1" and json.loads(written[2])["passage"] == "p2"


def shown_answer(question: str = "Is tea better than coffee?", k: int = 3) -> Answer:
    """An answer as the engine makes them, for the feedback's checks (its ranking is not what they test)."""
    passages = [Passage(rank, f"clueweb12-00{rank}___1", ("FIRST", "SECOND", "NO")[rank % 3], 3.0 / rank,
                        0.25 * rank if rank != 2 else None, "text", None, ()) for rank in range(1, k + 1)]
    return Answer(question, ("tea", "coffee"), "extracted", None, "default", "the default", 1000, passages,
                  Verdict.of(passages), 0.4)


def test_an_answer_id_names_what_was_shown_and_stays_valid_across_a_restart(tmp_path):
    from kueri.serve.feedback import FeedbackLog

    log = FeedbackLog(tmp_path)
    first = log.answered(shown_answer())
    assert re.fullmatch("[0-9a-f]{16}", first) and log.answered(shown_answer()) == first  # the same answer, one id
    other = log.answered(shown_answer(k=2))  # another answer (fewer passages shown): another id
    assert other != first and len((tmp_path / "answers.jsonl").read_text().splitlines()) == 2
    restarted = FeedbackLog(tmp_path)  # a new server on the work folder
    line = restarted.record({"answer": first, "passage": "clueweb12-002___1", "useful": False})
    assert {k: v for k, v in line.items() if k not in ("time", "answered")} == {
        "answer": first, "question": "Is tea better than coffee?", "objects": ["tea", "coffee"],
        "objects_from": "extracted", "topic": None, "config": "default", "aspect": None, "shown": 3,
        "passage": "clueweb12-002___1", "rank": 2, "stance": "NO", "relevance": 1.5, "quality": None, "useful": False}
    assert json.loads((tmp_path / "feedback.jsonl").read_text()) == line
    assert restarted.answered(shown_answer()) == first  # known from the file: not written again
    assert len((tmp_path / "answers.jsonl").read_text().splitlines()) == 2


def test_the_answers_and_feedback_files_are_rotated_by_size(tmp_path):
    from kueri.serve.feedback import FEEDBACK_KEPT, BadFeedback, FeedbackLog

    log = FeedbackLog(tmp_path, feedback_bytes=2_000, answers_bytes=3_000)
    ids = [log.answered(shown_answer(f"Is tea better than coffee, take {i}?")) for i in range(40)]
    assert sorted(p.name for p in tmp_path.glob("answers*.jsonl")) == ["answers.1.jsonl", "answers.jsonl"]
    assert all(p.stat().st_size <= 3_000 for p in tmp_path.glob("answers*.jsonl"))
    for i in range(60):  # the last answers can be judged; the first ones are rotated out
        log.record({"answer": ids[-1 - i % 3], "passage": "clueweb12-001___1", "useful": True})
    with pytest.raises(BadFeedback, match=f"answer {ids[0]} is not one this server gave"):
        log.record({"answer": ids[0], "passage": "clueweb12-001___1", "useful": True})
    feedback = sorted(p.name for p in tmp_path.glob("feedback*.jsonl"))
    assert len(feedback) == 1 + FEEDBACK_KEPT and all(p.stat().st_size <= 2_000 for p in tmp_path.glob("feedback*"))
    assert all(json.loads(line)["rank"] == 1 for p in tmp_path.glob("feedback*.jsonl")
               for line in p.read_text().splitlines())


def asgi_post(app, path: str, body: bytes, kind: str) -> tuple[int, dict[str, str], bytes]:
    return asgi_get(app, path, method="POST", body=body, headers=[(b"content-type", kind.encode())])


def test_junk_feedback_is_a_400_and_a_real_one_is_recorded_with_what_was_shown(idle_engine, tmp_path):
    pytest.importorskip("starlette", reason="kueri serve needs the serve extra: pip install 'kueri[serve]'")
    from kueri.serve.app import create_app
    from kueri.serve.feedback import FeedbackLog

    log = FeedbackLog(tmp_path / "work")
    app = create_app(idle_engine, log)
    given = log.answered(shown_answer())  # as /api/search does before it answers
    junk = [(b'{"answer": "0123456789abcdef", "passage": "clueweb12-001___1", "useful": true}', "application/json",
             "answer 0123456789abcdef is not one this server gave"),
            (b'{"answer": "%s", "passage": "clueweb12-999___1", "useful": true}' % given.encode(), "application/json",
             f"passage 'clueweb12-999___1' was not shown in answer {given}"),
            (b'{"question": "Is tea better?", "passage": "p", "useful": true}', "application/json",
             "unknown field(s) question; known: answer, passage, useful"),
            (b'{"passage": "clueweb12-001___1", "useful": true}', "application/json", "name the answer"),
            (b'{"answer": "%s", "useful": true}' % given.encode(), "application/json", "name the passage"),
            (b'{"answer": "%s", "passage": "p", "useful": "yes"}' % given.encode(), "application/json",
             "useful must be true or false"),
            (b"not json", "application/json", "not valid JSON"),
            (b"answer=x&id=p&useful=maybe", "application/x-www-form-urlencoded", "yes or no"),
            (b"answer=x&id=p&useful=yes&rank=1", "application/x-www-form-urlencoded", "unknown field(s) rank"),
            (b"x", "text/plain", "application/json or a form"),
            (b"id=" + b"x" * 20_000, "application/x-www-form-urlencoded", "larger than 10 kB")]
    for body, kind, message in junk:
        status, _, answer = asgi_post(app, "/api/feedback", body, kind)
        assert status in (400, 413) and message in json.loads(answer)["error"], (body[:40], answer)
        assert "\n" not in json.loads(answer)["error"]
    assert not (tmp_path / "work" / "feedback.jsonl").exists()
    form = urllib.parse.urlencode({"answer": given, "id": "clueweb12-003___1", "useful": "yes", "back": "/?q=tea#p3"})
    status, headers, _ = asgi_post(app, "/api/feedback", form.encode(), "application/x-www-form-urlencoded")
    assert status == 303 and headers["location"] == "/?q=tea#p3"
    status, _, body = asgi_post(app, "/api/feedback", json.dumps({"answer": given, "passage": "clueweb12-001___1",
                                                                   "useful": False}).encode(), "application/json")
    assert status == 200 and json.loads(body) == {"recorded": True}
    lines = [json.loads(line) for line in (tmp_path / "work" / "feedback.jsonl").read_text().splitlines()]
    assert [(j["passage"], j["rank"], j["stance"], j["relevance"], j["quality"], j["useful"]) for j in lines] == [
        ("clueweb12-003___1", 3, "FIRST", 1.0, 0.75, True), ("clueweb12-001___1", 1, "SECOND", 3.0, 0.25, False)]
    assert all(j["question"] == "Is tea better than coffee?" and j["config"] == "default" for j in lines)


def test_the_openapi_document_is_valid_and_lists_every_route(idle_engine):
    pytest.importorskip("starlette", reason="kueri serve needs the serve extra: pip install 'kueri[serve]'")
    validator = pytest.importorskip("openapi_spec_validator", reason="openapi-spec-validator (the test extra)")
    from kueri.serve.app import create_app
    from kueri.serve.openapi import document

    spec = document(["default"])
    validator.validate(spec)
    routes = create_app(idle_engine).inner.routes  # inside the security headers' middleware
    assert {route.path.replace(":path", "") for route in routes} == {p.replace("/{file}", "") for p in spec["paths"]}
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            assert operation["responses"], (path, method)
            for parameter in operation.get("parameters", []):
                assert parameter["description"], (path, parameter["name"])


def test_an_address_beyond_this_machine_is_told_apart_from_localhost():
    """serve logs a warning when it listens on one of these."""
    from kueri.serve.server import beyond_this_machine

    assert beyond_this_machine("0.0.0.0") and beyond_this_machine("192.168.1.5") and beyond_this_machine("::")
    assert not beyond_this_machine("127.0.0.1") and not beyond_this_machine("::1")
    assert not beyond_this_machine("localhost")


def test_the_command_refuses_a_wait_limit_that_is_not_positive(tmp_path):
    result = run([sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", "0",
                  "--max-wait", "0", "--workdir", str(tmp_path)])
    assert result.returncode == 2
    assert result.stderr.strip() == "kueri: error: --max-wait must be a positive number of seconds, not 0"


def asgi_get(app, path: str, query: str = "", method: str = "GET", body: bytes = b"",
             headers: list[tuple[bytes, bytes]] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request through the ASGI application itself (no server, no client library): status, headers, body."""
    import asyncio

    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "headers": headers or [],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "root_path": ""}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_full_queue_answers_503_with_retry_after_and_still_answers_bad_requests(idle_engine):
    import threading

    pytest.importorskip("starlette", reason="kueri serve needs the serve extra: pip install 'kueri[serve]'")
    from kueri.serve.app import create_app

    app = create_app(idle_engine)
    release = threading.Event()
    # a cold question running, expected to take 30 s: even a warm question (what one not yet probed is taken for)
    # would wait past the limit
    idle_engine._queue.question_seconds = 30.0
    busy = [idle_engine._queue.submit(lambda: release.wait(30), question=True)]
    try:
        status, headers, body = asgi_get(app, "/api/search", "q=Which+is+better%2C+tea+or+coffee%3F")
        assert status == 503 and headers["retry-after"] == "30" and b"would wait longer than 25 s" in body
        assert "default-src 'self'" in headers["content-security-policy"]
        status, headers, body = asgi_get(app, "/", "q=Which+is+better%2C+tea+or+coffee%3F")
        assert status == 503 and headers["retry-after"] == "30" and b'role="alert"' in body
        status, headers, body = asgi_get(app, "/v1/indexes/default/search", "query=tea+or+coffee")
        assert status == 503 and headers["retry-after"] == "30" and json.loads(body)["detail"]
        status, _, body = asgi_get(app, "/api/search", "q=")  # a bad request is answered at once
        assert status == 400 and json.loads(body)["error"] == "the question is empty"
    finally:
        release.set()
        busy[0].result(timeout=30)


def test_the_weak_evidence_threshold_belongs_to_the_configuration():
    """Learned for the default's own scores; a question without objects is ranked without the stages it was learned
    for, so it has none."""
    assert get_config("default").weak_score == 1.5608
    assert get_config("row-15").weak_score is None and get_config("auto-minilm-e5").weak_score is None
    assert without_objects(get_config("default")).weak_score is None


def test_pyserini_index_list_names_the_configurations_served(tmp_path):
    pytest.importorskip("starlette", reason="kueri serve needs the serve extra: pip install 'kueri[serve]'")
    from kueri.serve.app import create_app
    from kueri.serve.engine import Engine

    engine = Engine(corpus=SAMPLE_CORPUS, workdir=tmp_path, configs=("default", "dense-e5", "hybrid-e5", "row-15"))
    try:
        app = create_app(engine)
        for path in ("/v1/indexes", "/v1/indexes/"):  # pyserini's own server writes the second
            status, headers, body = asgi_get(app, path)
            assert status == 200 and json.loads(body) == ["default", "dense-e5", "hybrid-e5", "row-15"]
            assert "default-src 'self'" in headers["content-security-policy"]
        for kind, names in [("tf", ["default", "hybrid-e5", "row-15"]), ("lucene_hnsw", ["dense-e5", "hybrid-e5"]),
                            ("faiss", [])]:
            assert json.loads(asgi_get(app, "/v1/indexes/", f"index_type={kind}")[2]) == names, kind
        for query, message in [("index_type=bm25", "index_type must be one of tf, "),
                               ("colour=red", "unknown parameter(s) colour; known: index_type")]:
            status, _, body = asgi_get(app, "/v1/indexes", query)
            assert status == 400 and message in json.loads(body)["detail"]
    finally:
        engine._queue.shutdown()


def test_the_pipeline_labels_the_shown_hits_as_a_whole_run_does(tmp_path):
    """kueri serve ranks a question without the labelling stages and labels only the hits it shows: the same hits,
    order, scores and stances as the whole run, and the quality and deciding sentences of the configuration's own
    stages."""
    from kueri.parse import read_topics
    from kueri.quality.offline import OfflineQualityModel
    from kueri.records import STANCES
    from kueri.session import Session
    from kueri.stages.quality import shown_quality

    corpus = tmp_path / "small.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(line for _, line in zip(range(300), handle, strict=False)), encoding="utf-8")
    topic = next(t for t in read_topics(SAMPLE_CORPUS.parent / "topics.xml") if t.number == "2")
    config = get_config("quality-rerank")  # a quality stage, then the stance of every hit
    with Session(corpus, RunContext(tmp_path / "work", progress=False)) as session:
        whole = session.run(config, [topic])["2"]
        ranked = session.rank(config, [topic])["2"]
        shown = session.label(config, {"2": ranked[:10]}, [topic])["2"]
        ids = [hit.doc for hit in shown]
        context = session.context([topic])
        quality = shown_quality(config).scores(ids, context)
        sentences = config.plan().explain({"2": shown}, context)
        texts = session.texts("test")(ids)
        assert get_config("row-15").plan().explain({"2": shown}, context) == {}  # no stage of it explains a label
    assert [hit.doc for hit in ranked] == [hit.doc for hit in whole] and shown == whole[:10]
    assert {hit.stance for hit in shown} <= set(STANCES) and {hit.stance for hit in ranked} == {"Q0"}
    model = OfflineQualityModel.load()
    assert all(abs(quality[pid] - model.score(text)) < 1e-6 for pid, text in zip(ids, texts, strict=True))
    assert set(sentences) == set(ids) and any(sentences.values())
    assert shown_quality(get_config("default")).source == "offline"


def test_a_questions_expected_cost_is_found_from_its_candidates_in_the_stores(tmp_path):
    """On a real index of 40 passages: cold while the stores lack its first stage's candidates, warm once they hold
    them (random vectors: the probe reads only the digests), cached once its ranking is kept."""
    import gzip

    import numpy as np

    from kueri.encoders import text_digest
    from kueri.serve.engine import Engine

    corpus = tmp_path / "small.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(line for _, line in zip(range(40), handle, strict=False)), encoding="utf-8")
    engine = Engine(corpus=corpus, workdir=tmp_path / "work", configs=("default", "dense-e5", "hybrid-e5"))
    try:
        engine._queue.submit(engine._open).result()  # as the start does (no model loaded)
        engine.ready = True

        def probe(question: str, config: str | None = None) -> str:  # on the pipeline thread, as the queue probes
            return engine._queue.submit(lambda: engine.expected_cost(question, None, config)).result(timeout=120)

        question = "Which is better, a laptop or a desktop?"
        assert sorted(engine._stores) == ["e5", "minilm"]
        second = next(stage for stage in get_config("default").stages() if stage.name == "second-stage")
        assert second.embedded_depths(100) == {"minilm": 40, "e5": 15}  # the cascade's: what a probe looks up
        assert probe(question) == "cold"
        index = engine._any_index()
        digests = [text_digest(text) for text in index.contents(range(len(index)))]
        for encoder in engine._stores.values():
            encoder.store.add(digests, np.ones((len(digests), encoder.dimension), dtype=np.float32))
        assert probe(question) == "warm"
        assert probe("Which is better, tea or coffee?") == "warm"
        engine._answers.put(AnswerCache.key(question, None, "default"), None)  # a kept ranking (not read)
        assert probe(question) == "cached"
    finally:
        engine.close()


def test_the_cost_probe_is_right_for_every_first_stage(tmp_path):
    """Lexical, dense, hybrid and given candidates: a dense or hybrid first stage's candidates are not known cheaply,
    so a second stage after one is cold (unknown), and one alone is warm (every passage's vector is made ahead); given
    candidates are probed as a search's. No probe runs a dense search or loads an encoder."""
    import numpy as np

    from kueri.encoders import text_digest
    from kueri.records import Hit
    from kueri.serve.cost import CostProbe
    from kueri.session import Session
    from kueri.stages.given import given_stages
    from kueri.stages.plan import Plan

    corpus = tmp_path / "small.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(line for _, line in zip(range(40), handle, strict=False)), encoding="utf-8")
    topic = Topic("1", "Which is better, a laptop or a desktop?", ("laptop", "desktop"))
    second = {"second_stage": "second-stage-v2", "second_stage_cascade": get_config("default").second_stage_cascade}
    with Session(corpus, RunContext(tmp_path / "work", progress=False)) as session:
        stores = {name: session.encoder(name) for name in ("e5", "minilm")}
        probe = CostProbe(session, list(stores))
        kinds = {name: probe.kind(config, topic) for name, config in [
            ("lexical", get_config("default")), ("dense", get_config("dense-e5")),
            ("dense, second stage", get_config("dense-e5").with_changes(**second)),
            ("hybrid", get_config("hybrid-e5")),
            ("hybrid, second stage", get_config("hybrid-e5").with_changes(**second))]}
        assert kinds == {"lexical": "cold", "dense": "warm", "dense, second stage": "cold", "hybrid": "warm",
                         "hybrid, second stage": "cold"}
        index = session.index(get_config("default").analyzer)
        candidates = {"1": [Hit(pid, 1.0 / rank) for rank, pid in enumerate(index.ids[:30], start=1)]}
        given = Plan(given_stages(get_config("default"), candidates))
        assert given.cost(session.context([topic]), probe.stored).short > 0  # none of them is stored
        digests = [text_digest(text) for text in index.contents(range(len(index)))]
        for encoder in stores.values():
            encoder.store.add(digests, np.ones((len(digests), encoder.dimension), dtype=np.float32))
        # of the 30 candidates, MiniLM embeds 30 and e5 15: all stored now
        assert given.cost(session.context([topic]), probe.stored) == Cost(0, 30 + 15)
        assert probe.kind(get_config("default"), topic) == "warm"
        assert all(encoder._encoder is None for encoder in stores.values())  # no model was loaded
