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
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8")


def api(served: Served, path: str) -> tuple[int, dict]:
    status, body = get(served.url + path.lstrip("/"))
    return status, json.loads(body)


def search(served: Served, **params: object) -> tuple[int, dict]:
    return api(served, "api/search?" + urllib.parse.urlencode(params))


@pytest.fixture(scope="module")
def served(default_tira_run) -> Served:
    """``kueri serve --corpus SAMPLE`` on a free port of 127.0.0.1, ready."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", "0", "--workdir",
         str(default_tira_run.workdir), "--no-preembed"],
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
    status, answer = search(served, q=title, k=1000)
    assert status == 200, answer
    expected = reference_topic(default_tira_run.out / "run.txt", topic)
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
    before = sorted(p.name for p in default_tira_run.workdir.iterdir())
    for question in ("$(touch /tmp/kueri-pwned) or `id`", "../../etc/passwd or /etc/shadow", "'; DROP TABLE x; --"):
        status, answer = search(served, q=question, k=3)
        assert status == 200, answer
    assert not Path("/tmp/kueri-pwned").exists()
    assert sorted(p.name for p in default_tira_run.workdir.iterdir()) == before


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
                 'id="config-used"', 'href="/static/kueri.css"', 'href="https://chatnoir.eu/cache?uuid='):
        assert part in html, part
    assert "<script" not in html and not re.search(r"""(?:src|href)=["']https?://(?!chatnoir)""", html)
    status, html = get(served.url + "?q=" + "x" * 600)
    assert status == 400 and 'role="alert"' in html and "at most 500" in html
    status, css = get(served.url + "static/kueri.css")
    assert status == 200 and "@media" in css


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
