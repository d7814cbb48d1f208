"""kueri serve for real: the command on the shipped sample, on 127.0.0.1, over HTTP and in Chromium.

One server for the module, started on the session's work folder after the default run (its index and the
candidates' embeddings are there already, so every question here is warm), stopped with SIGTERM at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE_CORPUS

pytestmark = pytest.mark.slow
pytest.importorskip("starlette", reason="kueri serve needs the serve extra: pip install 'kueri[serve]'")
READY = re.compile(r"serve: ready at (http://\S+/)")


@dataclass
class Served:
    url: str
    process: subprocess.Popen
    log: list[str] = field(default_factory=list)


def get(url: str, timeout: float = 120) -> tuple[int, str]:
    """Status and body of a GET (an error status is an answer too, not an exception)."""
    status, _, body = get_with_headers(url, timeout)
    return status, body


def get_with_headers(url: str, timeout: float = 120, data: bytes | None = None,
                     headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """Status, headers (lower-case names) and body of a GET (a POST with ``data``), redirects not followed."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003 - urllib's signature
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode("utf-8")


def api(served: Served, path: str) -> tuple[int, dict]:
    status, body = get(served.url + path.lstrip("/"))
    return status, json.loads(body)


def search(served: Served, **params: object) -> tuple[int, dict]:
    return api(served, "api/search?" + urllib.parse.urlencode(params))


@pytest.fixture(scope="module")
def served(default_tira_run) -> Served:
    """``kueri serve --corpus SAMPLE`` on a free port of 127.0.0.1, ready."""
    # --max-wait 600: the free questions below are cold, and on a loaded machine a queue of them may pass the
    # default 60 s; the queue's limit has its own tests (test_serve_engine.py) and benchmark (bench_serve.py)
    process = subprocess.Popen(
        [sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", "0", "--workdir",
         str(default_tira_run.workdir), "--no-preembed", "--max-wait", "600"],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    server = Served("", process)
    deadline = time.monotonic() + 300
    assert process.stderr is not None
    for line in process.stderr:
        server.log.append(line)
        found = READY.search(line)
        if found:
            server.url = found.group(1)
            break
        assert time.monotonic() < deadline, "".join(server.log)
    assert server.url, "".join(server.log)
    drain = threading.Thread(target=lambda: server.log.extend(process.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    yield server
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, "".join(server.log)
    drain.join(timeout=10)
    assert "Traceback" not in "".join(server.log)


def test_a_stop_right_after_ready_stops_it(default_tira_run):
    """SIGTERM at once after "ready" (before uvicorn takes the signals over): it stops, exit code 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", "0", "--workdir",
         str(default_tira_run.workdir), "--no-preembed"],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if READY.search(line):
            process.send_signal(signal.SIGTERM)
            break
    assert process.wait(timeout=60) == 0
    assert "serve: stopped" in process.stderr.read()


def test_a_small_corpus_is_embedded_whole_in_the_background(tmp_path):
    """40 passages of the sample: after the start, every passage's embeddings are in the work folder's stores,
    and a question asked meanwhile is answered."""
    import gzip

    from kueri.encoders import ENCODERS

    corpus = tmp_path / "small.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(line for _, line in zip(range(40), handle, strict=False)), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "kueri", "serve", "--corpus", str(corpus), "--port", "0", "--workdir",
         str(tmp_path / "work")], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    server = Served("", process)
    assert process.stderr is not None
    try:
        for line in process.stderr:
            server.log.append(line)
            if READY.search(line):
                server.url = READY.search(line).group(1)
                status, answer = search(server, q="Which is better, a laptop or a desktop?", k=3)
                assert status == 200 and answer["topic"] == "2"
            if "every passage of the corpus is embedded" in line:
                break
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, "".join(server.log)
    from kueri.parse import PassageReader

    wanted = [hashlib.sha1(p.contents.encode("utf-8")).digest() for p in PassageReader(corpus)]  # the stores' keys
    assert any("of the corpus' 40 passages are embedded by" in line for line in server.log)
    for entry in ENCODERS.values():
        assert entry.store(tmp_path / "work").missing(wanted) == [], entry.name


def reference_topic(run_file: Path, topic: str) -> list[tuple[str, str]]:
    return [(line.split()[2], line.split()[1]) for line in run_file.read_text().splitlines()
            if line.split()[0] == topic]


def test_it_listens_on_localhost_only_by_default(served):
    assert served.url.startswith("http://127.0.0.1:")
    status, health = api(served, "api/health")
    assert status == 200 and health["status"] == "ok" and health["passages"] == 2607
    assert health["configs"] == ["default"]


@pytest.mark.parametrize("topic", ["2", "12", "34", "53", "100"])
def test_a_touche_question_gets_the_ranking_of_kueri_run(served, default_tira_run, topics, topic):
    """Same passages, same order, same stance as ``kueri run --config default`` for that topic (all its hits)."""
    title = next(t.title for t in topics if t.number == topic)
    expected = reference_topic(default_tira_run.out / "run.txt", topic)
    status, answer = search(served, q=title, k=10)  # the server labels the passages it shows, then more when asked
    assert status == 200 and [(p["id"], p["stance"]) for p in answer["passages"]] == expected[:10], answer
    status, answer = search(served, q=title, k=1000)
    assert status == 200, answer
    assert answer["topic"] == topic and answer["hits"] == len(expected)
    assert [(p["id"], p["stance"]) for p in answer["passages"]] == expected
    assert answer["objects"] == list(next(t.objects for t in topics if t.number == topic))


def test_a_free_question_gets_its_objects_a_verdict_and_both_sides(served):
    status, answer = search(served, q="Which is better for a student, a laptop or a desktop?", k=20)
    assert status == 200, answer
    assert answer["objects"] == ["laptop", "desktop"] and answer["objects_from"] == "extracted"
    assert answer["topic"] is None and answer["config"] == "default" and len(answer["passages"]) == 20
    verdict = answer["verdict"]
    assert verdict["depth"] == 20 and sum(verdict["counts"].values()) == 20
    assert verdict["leaning"] in ("first", "second", "balanced", "none")
    for rank, passage in enumerate(answer["passages"], start=1):
        assert passage["rank"] == rank and passage["stance"] in ("FIRST", "SECOND", "NEUTRAL", "NO")
        assert 0 <= passage["quality"] <= 1 and passage["text"]
        # The sentence that decided the stance is the passage's own (none: it names neither object).
        assert passage["deciding_sentence"] is None or passage["deciding_sentence"] in passage["text"]
    assert any(p["deciding_sentence"] for p in answer["passages"] if p["stance"] != "NO")
    scores = [p["relevance"] for p in answer["passages"]]
    assert scores == sorted(scores, reverse=True)


def test_objects_given_replace_the_extracted_ones(served):
    status, answer = search(served, q="Which is better for a student, a laptop or a desktop?",
                            objects="desktop,laptop", k=5)
    assert status == 200 and answer["objects"] == ["desktop", "laptop"] and answer["objects_from"] == "given"


def test_a_question_without_two_objects_still_gets_a_ranked_list_and_says_so(served):
    status, answer = search(served, q="laptop battery life", k=5)
    assert status == 200 and answer["objects"] is None and answer["objects_from"] == "none"
    assert len(answer["passages"]) == 5 and "no two objects" in answer["note"]
    assert {p["stance"] for p in answer["passages"]} == {"NO"}
    assert answer["evidence"] is None  # the threshold is for the whole configuration's scores, not the search's


@pytest.mark.parametrize(("query", "status", "message"), [
    ("q=", 400, "the question is empty"),
    ("", 400, "the question is empty"),
    ("q=" + "x" * 501, 400, "is 501 characters long; at most 500"),
    ("q=%ff%fe%00laptop", 400, "binary data or control characters"),
    ("q=a%00b", 400, "binary data or control characters"),
    ("q=laptop&colour=red", 400, "unknown parameter(s) colour"),
    ("q=laptop&k=0", 400, "k must be between 1 and 1000"),
    ("q=laptop&k=many", 400, "k must be a whole number"),
    ("q=laptop&objects=onlyone", 400, "objects must be two names"),
    ("q=laptop&config=row-16", 400, "configuration 'row-16' is not offered here"),
    ("q=laptop&config=no-such-config", 400, "is not offered here"),
])
def test_bad_input_is_a_json_400_with_a_message(served, query, status, message):
    got, body = api(served, "api/search?" + query)
    assert (got, body["status"]) == (status, status) and message in body["error"], body


def test_unknown_paths_and_methods_are_json_errors(served):
    assert api(served, "api/nothing") == (404, {"error": "no such page: /api/nothing", "status": 404})
    request = urllib.request.Request(served.url + "api/search?q=laptop", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 405 and json.loads(error.value.read())["status"] == 405


def test_a_query_reaches_no_shell_and_no_file(served, default_tira_run):
    before = {p.name for p in default_tira_run.workdir.iterdir()}
    for question in ("$(touch /tmp/kueri-pwned) or `id`", "../../etc/passwd or /etc/shadow", "'; DROP TABLE x; --"):
        status, answer = search(served, q=question, k=3)
        assert status == 200, answer
    assert not Path("/tmp/kueri-pwned").exists()
    # nothing new in the work folder but indexes, which the session's other test process may build there meanwhile
    new = {p.name for p in default_tira_run.workdir.iterdir()} - before
    assert all(name.startswith("index-") for name in new), new


def test_several_people_at_once(served, topics):
    questions = [t.title for t in topics[:6]] + ["Python vs Java for beginners", "Is tea better than coffee?"]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda q: search(served, q=q, k=10), questions * 2))
    assert all(status == 200 for status, _ in answers)
    for (_, first), (_, again) in zip(answers[:8], answers[8:], strict=True):
        assert first["passages"] == again["passages"]
    assert api(served, "api/health")[1]["status"] == "ok"  # and it keeps serving


def test_the_page_works_without_javascript(served):
    status, html = get(served.url + "?" + urllib.parse.urlencode({"q": "Which is better, Canon or Nikon?"}))
    assert status == 200
    for part in ('id="verdict"', 'id="for-first"', 'id="for-second"', 'id="neutral"', '<mark class="obj1">Canon',
                 'id="config-used"', 'href="/static/kueri.css"', 'href="https://chatnoir.eu/cache?uuid=',
                 'Stance decided by: <q>'):
        assert part in html, part
    assert "<script" not in html and not re.search(r"""(?:src|href)=["']https?://(?!chatnoir)""", html)
    status, html = get(served.url + "?q=" + "x" * 600)
    assert status == 400 and 'role="alert"' in html and "at most 500" in html
    status, css = get(served.url + "static/kueri.css")
    assert status == 200 and "@media" in css


def test_an_aspect_is_found_shown_and_narrows_only_the_list(served):
    question = "Which is cheaper, a laptop or a desktop?"
    status, answer = search(served, q=question, k=20)
    assert status == 200 and answer["comparative"] is True
    assert answer["objects"] == ["laptop", "desktop"] and (answer["aspect"], answer["aspect_from"]) == ("cheaper",
                                                                                                       "extracted")
    about = [p for p in answer["passages"] if p["about_aspect"]]
    assert all(re.search(r"(?i)\bcheap", p["text"]) for p in about)
    assert not any(re.search(r"(?i)\bcheap", p["text"]) for p in answer["passages"] if not p["about_aspect"])
    status, narrowed = search(served, q=question, k=20, narrow=1)
    assert [p["id"] for p in narrowed["passages"]] == [p["id"] for p in about]  # the ranks stay the ranking's
    # the ranking is the question's whatever the aspect: another aspect marks other passages of the same list
    status, other = search(served, q=question, k=20, aspect="battery")
    assert other["aspect"] == "battery" and other["aspect_from"] == "given"
    assert [p["id"] for p in other["passages"]] == [p["id"] for p in answer["passages"]]
    status, none = search(served, q=question, k=20, aspect="")
    assert none["aspect"] is None and not any(p["about_aspect"] for p in none["passages"])


def test_a_summary_per_side_links_to_shown_passages_of_that_side(served):
    status, answer = search(served, q="Which is better, a laptop or a desktop?", k=10)
    assert status == 200 and set(answer["summaries"]) == {"first", "second"}
    by_rank = {p["rank"]: p for p in answer["passages"]}
    for side, stance in (("first", "FIRST"), ("second", "SECOND")):
        for sentence in answer["summaries"][side]:
            passage = by_rank[sentence["rank"]]
            assert passage["stance"] == stance and passage["id"] == sentence["id"]
            assert sentence["text"] in " ".join(passage["text"].split())
    assert any(answer["summaries"].values())


def test_a_question_that_compares_nothing_is_said_so_and_still_answered(served):
    status, answer = search(served, q="Can I bring a laptop or a tablet on a plane?", k=5)
    assert status == 200 and answer["comparative"] is False and len(answer["passages"]) == 5
    status, html = get(served.url + "?" + urllib.parse.urlencode({"q": "Can I bring a laptop or a tablet on a plane?"}))
    assert status == 200 and 'id="not-comparative"' in html


def test_a_question_the_sample_cannot_answer_gets_no_confident_verdict(served):
    """The issue's example: the sample has passages about storing tea and boiling kettles, nothing on health."""
    status, answer = search(served, q="Is tea healthier than coffee?", k=10)
    assert status == 200 and answer["evidence"]["weak"] is True and answer["verdict"]["confident"] is False
    status, html = get(served.url + "?" + urllib.parse.urlencode({"q": "Is tea healthier than coffee?"}))
    assert 'id="weak"' in html and "holds little on this question" in html and 'data-confident="no"' in html
    assert "The passages favour" not in html
    status, answer = search(served, q="Which is better, a laptop or a desktop?", k=10)  # a topic it can answer
    assert answer["evidence"]["weak"] is False and answer["verdict"]["confident"] is True


def test_openapi_json_is_valid_openapi_3_and_lists_every_endpoint(served):
    validator = pytest.importorskip("openapi_spec_validator", reason="openapi-spec-validator (the test extra)")
    status, spec = api(served, "openapi.json")
    assert status == 200
    validator.validate(spec)
    assert set(spec["paths"]) >= {"/", "/api/search", "/api/health", "/api/feedback", "/openapi.json", "/api/docs",
                                  "/v1/indexes/{index}/search", "/v1/indexes/{index}/documents/{docid}"}
    search_parameters = {p["name"] for p in spec["paths"]["/api/search"]["get"]["parameters"]}
    from kueri.serve.app import API_PARAMETERS

    assert search_parameters == set(API_PARAMETERS)
    assert {"400", "404", "405", "500", "503"} <= set(spec["paths"]["/api/search"]["get"]["responses"])
    status, html = get(served.url + "api/docs")
    assert status == 200 and all(f'id="{op}"' in html for op in ("search", "pyseriniSearch", "feedback", "health"))
    assert not re.search(r"""(?:src|href)=["']https?://""", html)  # nothing from outside the server


def test_a_pyserini_client_gets_pyserini_shaped_answers(served, default_tira_run, topics):
    """The requests a client written for pyserini's REST server sends (the index list; rank_llm's ServiceRetriever:
    query, hits, qid; then the document by id), and the fields it reads."""
    for path in ("v1/indexes/", "v1/indexes/?index_type=tf", "v1/indexes"):
        status, body = get(served.url + path)
        assert status == 200 and json.loads(body) == ["default"], path
    title = next(t.title for t in topics if t.number == "2")
    url = served.url + "v1/indexes/default/search?" + urllib.parse.urlencode({"query": title, "hits": 50,
                                                                               "qid": "2"})
    status, body = get(url)
    assert status == 200
    data = json.loads(body)
    assert data["query"] == {"qid": "2", "text": title}
    assert [set(c) for c in data["candidates"]] == [{"docid", "score", "doc"}] * 50
    expected = reference_topic(default_tira_run.out / "run.txt", "2")[:50]
    assert [c["docid"] for c in data["candidates"]] == [doc for doc, _ in expected]  # the ranking of kueri run
    first = data["candidates"][0]
    assert first["doc"]["id"] == first["docid"] and first["doc"]["contents"]
    status, body = get(served.url + "v1/indexes/default/documents/" + urllib.parse.quote(first["docid"]))
    assert status == 200 and json.loads(body) == {"docid": first["docid"], "text": first["doc"]}
    # pyserini's errors: {"detail": ...}
    for path, code, message in [("v1/indexes/msmarco-v1-passage/search?query=x", 404, "not served here"),
                                ("v1/indexes/default/search?query=", 400, "the query is empty"),
                                ("v1/indexes/default/search?query=x&hits=0", 400, "hits must be between"),
                                ("v1/indexes/default/documents/no-such-passage", 404, "not found"),
                                ("v1/indexes/?index_type=bm25", 400, "index_type must be one of")]:
        status, body = get(served.url + path)
        assert status == code and message in json.loads(body)["detail"], (path, body)


def test_an_answer_downloads_as_json_and_as_a_touche_run_file(served, default_tira_run, topics):
    from kueri.runfile import read_run

    title = next(t.title for t in topics if t.number == "12")
    query = urllib.parse.urlencode({"q": title, "k": 25})
    status, headers, body = get_with_headers(served.url + f"api/search?{query}&format=run")
    assert status == 200 and 'attachment; filename="kueri-' in headers["content-disposition"]
    assert headers["content-type"].startswith("text/plain")
    path = default_tira_run.workdir.parent / "export-run.txt"
    path.write_text(body)
    run = read_run(path)
    expected = reference_topic(default_tira_run.out / "run.txt", "12")[:25]
    assert [(h.doc, h.stance) for h in run["12"]] == expected
    status, headers, body = get_with_headers(served.url + f"api/search?{query}&format=json")
    assert status == 200 and headers["content-disposition"].endswith('.json"') and json.loads(body)["topic"] == "12"


def test_a_feedback_click_is_appended_to_the_work_folders_file(served, default_tira_run):
    """A judgment names an answer the server gave and a passage it showed; the server writes what was shown."""
    path = default_tira_run.workdir / "feedback.jsonl"
    before = path.read_text().splitlines() if path.exists() else []
    status, answer = search(served, q="Which is better, Canon or Nikon?", k=5)
    assert status == 200 and re.fullmatch("[0-9a-f]{16}", answer["answer_id"])
    first, third = answer["passages"][0], answer["passages"][2]
    form = urllib.parse.urlencode({"answer": answer["answer_id"], "id": first["id"], "useful": "yes",
                                   "back": "/?q=Canon#p1"}).encode()
    status, headers, _ = get_with_headers(served.url + "api/feedback", data=form)
    assert status == 303 and headers["location"] == "/?q=Canon#p1"
    status, _, body = get_with_headers(served.url + "api/feedback", data=json.dumps(
        {"answer": answer["answer_id"], "passage": third["id"], "useful": False}).encode(),
        headers={"Content-Type": "application/json"})
    assert status == 200 and json.loads(body) == {"recorded": True}
    lines = [json.loads(line) for line in path.read_text().splitlines()[len(before):]]
    assert [(j["passage"], j["rank"], j["stance"], j["relevance"], j["useful"], j["objects"]) for j in lines] == [
        (first["id"], 1, first["stance"], first["relevance"], True, ["Canon", "Nikon"]),
        (third["id"], 3, third["stance"], third["relevance"], False, ["Canon", "Nikon"])]
    assert all(j["question"] == "Which is better, Canon or Nikon?" and j["config"] == "default" for j in lines)
    for data, kind, message in [(b'{"useful": true}', "application/json", "name the answer"),
                                (json.dumps({"answer": answer["answer_id"], "passage": "clueweb12-nowhere___1",
                                             "useful": True}).encode(), "application/json", "was not shown in answer"),
                                (b'{"answer": "0000000000000000", "passage": "p", "useful": true}',
                                 "application/json", "is not one this server gave"),
                                (b"not json", "application/json", "not valid JSON"),
                                (b"answer=x&id=p&useful=maybe", "application/x-www-form-urlencoded", "yes or no"),
                                (b"x", "text/plain", "application/json or a form"),
                                (b"id=" + b"x" * 20_000, "application/x-www-form-urlencoded", "larger than 10 kB")]:
        status, _, body = get_with_headers(served.url + "api/feedback", data=data, headers={"Content-Type": kind})
        assert status in (400, 413) and message in json.loads(body)["error"], (data[:30], body)
    assert len(path.read_text().splitlines()) == len(before) + 2


def test_every_response_carries_the_security_headers(served):
    for path in ("", "api/health", "openapi.json", "static/kueri.css", "api/nothing", "v1/indexes/x/search"):
        _, headers, _ = get_with_headers(served.url + path)
        assert "default-src 'self'" in headers["content-security-policy"], path
        assert "frame-ancestors 'none'" in headers["content-security-policy"] and headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"


# -- in a real browser ---------------------------------------------------------------------------------------------

def chromium() -> tuple[str, str] | None:
    """Debian's chromium and chromium-driver (the Makefile's debian-packages installs them), if here."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
    found = chromium()
    if found is None:
        pytest.skip("no chromium and chromedriver (Debian: apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1600",
                     "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # to see what the CSP refused, if anything
    driver = webdriver.Chrome(service=Service(executable_path=found[1]), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def test_in_chromium_a_person_asks_and_sees_both_sides(served, browser, topics):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served.url)
    box = browser.find_element(By.ID, "q")
    assert box.get_attribute("placeholder") and browser.find_element(By.CSS_SELECTOR, "label[for=q]").text
    box.send_keys("Which is better, a laptop or a desktop?")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 120).until(expected_conditions.presence_of_element_located((By.ID, "verdict")))
    first = browser.find_element(By.ID, "for-first")
    second = browser.find_element(By.ID, "for-second")
    assert "laptop" in first.find_element(By.TAG_NAME, "h3").text
    assert "desktop" in second.find_element(By.TAG_NAME, "h3").text
    passages = browser.find_elements(By.CSS_SELECTOR, "article.passage")
    assert len(passages) == 10
    # the two columns sit side by side on a wide screen
    assert first.location["y"] == second.location["y"] and first.location["x"] < second.location["x"]
    bar = browser.find_element(By.CSS_SELECTOR, "#verdict .bar")
    assert "percent" in bar.get_attribute("aria-label")
    marks = browser.find_elements(By.CSS_SELECTOR, "article.passage mark.obj1")
    assert marks and marks[0].text.lower().startswith("laptop")
    assert browser.find_element(By.ID, "first").get_attribute("value") == "laptop"
    assert "default" in browser.find_element(By.ID, "config-used").text
    shown = [p.get_attribute("id") for p in passages]
    # the same answer as JSON
    browser.get(served.url + "api/search?" + urllib.parse.urlencode({"q": "Which is better, a laptop or a desktop?"}))
    answer = json.loads(browser.find_element(By.TAG_NAME, "body").text)
    assert answer["objects"] == ["laptop", "desktop"] and len(answer["passages"]) == 10
    assert shown == [f"p{p['rank']}" for p in sorted(
        answer["passages"], key=lambda p: ({"FIRST": 0, "SECOND": 1, "NEUTRAL": 2, "NO": 3}[p["stance"]], p["rank"]))]


def test_in_chromium_an_error_is_a_note_and_a_phone_sees_one_column(served, browser):
    from selenium.webdriver.common.by import By

    browser.get(served.url + "?q=" + "x" * 501)
    assert "at most 500" in browser.find_element(By.ID, "error").text
    browser.set_window_size(390, 844)  # a phone
    try:
        browser.get(served.url + "?" + urllib.parse.urlencode({"q": "Which is better, Canon or Nikon?"}))
        first = browser.find_element(By.ID, "for-first")
        second = browser.find_element(By.ID, "for-second")
        assert second.location["y"] > first.location["y"]  # stacked
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= 390  # nothing wider than the screen
    finally:
        browser.set_window_size(1280, 1600)


def csp_refusals(browser) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if "Content Security Policy" in entry["message"]]


def ask_in_the_form(browser, served: Served, question: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served.url)
    browser.find_element(By.ID, "q").send_keys(question)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 300).until(expected_conditions.presence_of_element_located((By.ID, "answer")))


def test_in_chromium_an_aspect_question_shows_objects_aspect_summaries_and_verdict(served, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # start from a clean log
    ask_in_the_form(browser, served, "Which is cheaper, a laptop or a desktop?")
    assert browser.find_element(By.ID, "first").get_attribute("value") == "laptop"
    assert browser.find_element(By.ID, "second").get_attribute("value") == "desktop"
    assert browser.find_element(By.ID, "aspect").get_attribute("value") == "cheaper"
    assert browser.find_element(By.ID, "aspect-used").text == "cheaper"
    summaries = [browser.find_element(By.ID, f"summary-{side}") for side in ("first", "second")]
    assert all(s.is_displayed() and s.find_element(By.TAG_NAME, "h4").text == "In short" for s in summaries)
    sentences = browser.find_elements(By.CSS_SELECTOR, ".summary li")
    assert sentences, "no summary sentence on either side"
    for link in browser.find_elements(By.CSS_SELECTOR, ".summary li a"):
        target = link.get_attribute("href").split("#")[1]
        column = link.find_element(By.XPATH, "ancestor::section[1]")
        assert column.find_element(By.ID, target)  # the sentence's passage is shown, in the same column
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.is_displayed() and "Verdict of the top 10" in verdict.text
    assert browser.find_element(By.CSS_SELECTOR, "#verdict svg.bar").size["width"] > 100  # the bar, drawn
    # narrowing to the aspect: only marked passages remain (read once the narrowed page has replaced this one)
    browser.find_element(By.ID, "narrow").click()
    before = browser.find_element(By.ID, "answer")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 300).until(expected_conditions.staleness_of(before))
    WebDriverWait(browser, 300).until(expected_conditions.presence_of_element_located((By.ID, "answer")))
    shown = browser.find_elements(By.CSS_SELECTOR, "article.passage")
    assert len(shown) == len(browser.find_elements(By.CSS_SELECTOR, "article.passage .about-aspect"))
    assert csp_refusals(browser) == []  # the page needs nothing its own policy forbids


def test_in_chromium_the_api_page_lists_every_endpoint_from_this_server_only(served, browser):
    from selenium.webdriver.common.by import By

    browser.get(served.url + "api/docs")
    listed = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "section.endpoint h2")]
    status, spec = api(served, "openapi.json")
    assert listed == [f"{method.upper()} {path}" for path, methods in spec["paths"].items() for method in methods]
    origins = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => new URL(e.name).origin)")
    assert set(origins) <= {served.url.rstrip("/")}


def test_in_chromium_an_export_and_a_feedback_click(served, browser, default_tira_run):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    ask_in_the_form(browser, served, "Which is better, Canon or Nikon?")
    href = browser.find_element(By.ID, "download-run").get_attribute("href")
    run = browser.execute_async_script(
        "const done = arguments[1]; fetch(arguments[0]).then(r => r.text()).then(done)", href)
    lines = run.splitlines()
    assert len(lines) == 10 and all(line.split()[0] == "3" and line.endswith("kueri-default") for line in lines)
    path = default_tira_run.workdir / "feedback.jsonl"
    before = len(path.read_text().splitlines()) if path.exists() else 0
    card = browser.find_elements(By.CSS_SELECTOR, "article.passage")[0]
    passage_id = card.find_element(By.CSS_SELECTOR, "input[name=id]").get_attribute("value")
    card_id = card.get_attribute("id")
    card.find_element(By.CSS_SELECTOR, "button.useful[value=yes]").click()
    WebDriverWait(browser, 120).until(expected_conditions.staleness_of(card))
    WebDriverWait(browser, 120).until(expected_conditions.presence_of_element_located((By.ID, "verdict")))
    url = browser.current_url
    assert "/api/" not in url and "q=Which" in url and url.endswith("#" + card_id), url  # back, at the passage
    lines = path.read_text().splitlines()
    assert len(lines) == before + 1
    judgment = json.loads(lines[-1])
    # the server fills in the rank it showed: the card's (the page's columns put a side's passages together)
    assert (judgment["question"], judgment["passage"], judgment["rank"], judgment["useful"]) == (
        "Which is better, Canon or Nikon?", passage_id, int(card_id.removeprefix("p")), True)


def test_in_chromium_a_question_the_corpus_cannot_answer(served, browser):
    from selenium.webdriver.common.by import By

    ask_in_the_form(browser, served, "Is tea healthier than coffee?")
    assert "holds little on this question" in browser.find_element(By.ID, "weak").text
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.get_attribute("data-confident") == "no" and "No verdict" in verdict.text
    assert "favour" not in verdict.text and not browser.find_elements(By.CSS_SELECTOR, "#verdict svg.bar")
