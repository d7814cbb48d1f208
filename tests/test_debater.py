"""The IBM Debater client against a real HTTP server on loopback that speaks the same protocol.

The server (:class:`FakeDebater`) answers ``POST /score/`` like the service and can be told, request
by request, to fail: slow answers, 429 with Retry-After, 5xx, dropped connections, wrong-length or
non-numeric answers; it refuses a wrong key with 401. It counts every sentence it receives, so the
tests can check what the client sent. Retry delays are recorded instead of slept (except where a
real client timeout is the point), so the file runs in seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from kueri.cli import main as kueri_main
from kueri.errors import KueriError, SetupError
from kueri.quality.debater import (
    DebaterAnswerError,
    DebaterClient,
    DebaterKeyError,
    RetryPolicy,
    ScoreFile,
    parse_retry_after,
    read_api_key,
    score_with_debater,
)
from kueri.quality.scores import read_quality_scores

ROOT = Path(__file__).resolve().parent.parent
KEY = "test-key-Zq83hX1"


def fake_score(sentence: str) -> float:
    """The fake service's deterministic quality of a sentence, in [0, 1]."""
    return int(hashlib.md5(sentence.encode("utf-8")).hexdigest()[:6], 16) / 0xFFFFFF


class FakeDebater:
    """A loopback Debater service; ``plan`` holds one action per coming request ("ok" when empty).

    Actions: ``ok``, ``slow:SECONDS``, ``hold`` (wait for :attr:`release`), ``status:CODE``,
    ``429:RETRY_AFTER``, ``drop`` (close the connection unanswered), ``short`` (one score too few),
    ``text`` (strings instead of numbers), ``notjson``.
    """

    def __init__(self, key: str = KEY) -> None:
        self.key = key
        self.plan: deque[str] = deque()
        self.requests = 0
        self.received: Counter[str] = Counter()
        self.headers: list[dict[str, str]] = []
        self.bodies: list[dict] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like the real service

            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in (extra or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    self.close_connection = True

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with fake.lock:
                    fake.requests += 1
                    action = fake.plan.popleft() if fake.plan else "ok"
                    fake.headers.append(dict(self.headers.items()))
                if self.path != "/score/":
                    return self.answer(404, b'"not found"')
                if self.headers.get("apikey") != fake.key:
                    return self.answer(401, b'{"error": "invalid api key"}')
                request = json.loads(body)
                sentences = [pair[0] for pair in request["sentence_topic_pairs"]]
                with fake.lock:
                    fake.bodies.append(request)
                    fake.received.update(sentences)
                kind, _, arg = action.partition(":")
                scores: list[object] = [fake_score(s) for s in sentences]
                if kind == "slow":
                    time.sleep(float(arg))
                elif kind == "hold":
                    fake.held.set()
                    fake.release.wait(30)
                elif kind == "status":
                    return self.answer(int(arg), b'{"error": "server trouble"}')
                elif kind == "429":
                    return self.answer(429, b'{"error": "too many requests"}', {"Retry-After": arg})
                elif kind == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
                elif kind == "short":
                    scores = scores[:-1]
                elif kind == "text":
                    scores = ["high"] * len(scores)
                elif kind == "notjson":
                    return self.answer(200, b"<html>maintenance</html>")
                return self.answer(200, json.dumps(scores).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/score/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeDebater:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    with FakeDebater() as fake:
        yield fake


def make_corpus(path: Path, n: int) -> tuple[Path, dict[str, str]]:
    """A corpus of ``n`` passages (unique texts, one with backslashes, one DocT5Query-expanded);
    returns it and sentence -> id (what the server receives maps back to passages)."""
    lines, sentence_to_id = [], {}
    for i in range(n):
        pid = f"clueweb12-test-{i:04d}___1"
        text = f"Passage {i} argues that option {i % 7} is better, because of reason {i * 31 % 101}."
        if i == 1:
            text = r"A \"quoted\" claim with back\slashes " + text
        contents = text + ("<query> generated query</query>" if i == 2 else "")
        lines.append(json.dumps({"id": pid, "contents": contents, "chatNoirUrl": None}))
        sentence_to_id[text.replace("\\", "")] = pid
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, sentence_to_id


class Sleeps(list):
    """Records retry delays instead of sleeping them."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client_for(fake: FakeDebater, key: str = KEY, sleep=None, **policy) -> DebaterClient:
    settings = {"tries": 4, "base_delay": 0.01, "max_delay": 0.05, "timeout": 5.0, "max_failed_batches": 2}
    settings.update(policy)
    session = requests.Session()
    session.trust_env = False  # no proxy settings of the environment for loopback
    return DebaterClient(key, url=fake.url, policy=RetryPolicy(**settings), session=session,
                         sleep=sleep if sleep is not None else Sleeps(), rng=random.Random(0))


def read_lines(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the protocol --------------------------------------------------------------------------------------


def test_scores_every_passage_with_the_original_protocol(tmp_path, server):
    corpus, by_sentence = make_corpus(tmp_path / "c.jsonl", 23)
    scores = tmp_path / "scores.tsv"
    summary = score_with_debater(corpus, scores, client_for(server), batch_size=10, progress=False)
    assert (summary.passages, summary.scored, summary.cached, summary.failed) == (23, 23, 0, 0)
    assert server.requests == 3  # 10 + 10 + 3
    # Body: [[sentence, ""], ...]: no DocT5Query suffix, no backslashes; headers as the service wants.
    pairs = [pair for body in server.bodies for pair in body["sentence_topic_pairs"]]
    assert all(topic == "" for _, topic in pairs)
    assert pairs[1][0].startswith('A "quoted" claim with backslashes ')
    assert "<query>" not in pairs[2][0]
    assert server.headers[0]["apikey"] == KEY
    assert server.headers[0]["content-type"].startswith("application/json")
    # One line per passage, in corpus order, 6 decimals, the service's value.
    lines = read_lines(scores)
    assert [pid for pid, _ in lines] == list(by_sentence.values())
    for (pid, text), (sentence, expected_id) in zip(lines, by_sentence.items(), strict=True):
        assert pid == expected_id and text == f"{fake_score(sentence):.6f}"
    assert len(read_quality_scores(str(scores))) == 23  # the reranker reads it


def test_a_rerun_sends_nothing_already_scored(tmp_path, server):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 12)
    scores = tmp_path / "scores.tsv"
    score_with_debater(corpus, scores, client_for(server), batch_size=5, progress=False)
    before = scores.read_bytes()
    server.requests = 0
    summary = score_with_debater(corpus, scores, client_for(server), batch_size=5, progress=False)
    assert (server.requests, summary.scored, summary.cached) == (0, 0, 12)
    assert scores.read_bytes() == before


# -- faults that are retried ---------------------------------------------------------------------------


def test_a_slow_answer_times_out_and_is_retried(tmp_path, server):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 4)
    server.plan.extend(["slow:1.0"])
    client = client_for(server, timeout=0.25)
    summary = score_with_debater(corpus, tmp_path / "s.tsv", client, batch_size=4, progress=False)
    assert (summary.scored, summary.failed, server.requests) == (4, 0, 2)
    assert len(client.sleep) == 1


def test_429_honours_retry_after_in_seconds_and_as_a_date(tmp_path, server):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 4)
    date = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    server.plan.extend(["429:7", f"429:{date}"])
    client = client_for(server)
    summary = score_with_debater(corpus, tmp_path / "s.tsv", client, batch_size=4, progress=False)
    assert (summary.scored, server.requests) == (4, 3)
    first, second = client.sleep
    assert first >= 7  # never sooner than the server asked (backoff alone would be ~0.01 s)
    assert 25 <= second <= 31


def test_retry_after_is_capped(tmp_path, server):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 2)
    server.plan.extend(["429:86400"])
    client = client_for(server, max_retry_after=60.0)
    score_with_debater(corpus, tmp_path / "s.tsv", client, batch_size=4, progress=False)
    assert client.sleep == [60.0]


def test_5xx_and_dropped_connections_are_retried_with_growing_backoff(tmp_path, server):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 6)
    server.plan.extend(["status:500", "drop", "status:503"])
    client = client_for(server, tries=5, base_delay=1.0, max_delay=100.0)
    summary = score_with_debater(corpus, tmp_path / "s.tsv", client, batch_size=6, progress=False)
    assert (summary.scored, summary.failed, server.requests) == (6, 0, 4)
    # Exponential with jitter: retry k waits between 2^k / 2 and 2^k seconds.
    assert [0.5 <= d <= 1 for d in client.sleep[:1]] == [True]
    assert 1 <= client.sleep[1] <= 2 and 2 <= client.sleep[2] <= 4


def test_a_batch_that_keeps_failing_is_counted_and_the_rest_goes_on(tmp_path, server):
    corpus, by_sentence = make_corpus(tmp_path / "c.jsonl", 9)
    scores = tmp_path / "s.tsv"
    server.plan.extend(["status:502"] * 3)  # batch 1 fails all 3 tries; batches 2 and 3 succeed
    summary = score_with_debater(corpus, scores, client_for(server, tries=3), batch_size=3, progress=False)
    assert (summary.scored, summary.failed, summary.not_sent) == (6, 3, 0)
    assert "batch 1" in summary.failed_batches[0]
    assert [pid for pid, _ in read_lines(scores)] == list(by_sentence.values())[3:]
    # The rerun sends only the failed batch.
    server.received.clear()
    score_with_debater(corpus, scores, client_for(server), batch_size=3, progress=False)
    assert set(by_sentence[s] for s in server.received) == set(list(by_sentence.values())[:3])
    assert sorted(pid for pid, _ in read_lines(scores)) == sorted(by_sentence.values())


def test_the_run_stops_when_the_service_stays_down(tmp_path, server, caplog):
    caplog.set_level(logging.INFO, logger="kueri")
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 20)
    server.plan.extend(["status:503"] * 100)
    summary = score_with_debater(corpus, tmp_path / "s.tsv", client_for(server, tries=2, max_failed_batches=2),
                                 batch_size=4, progress=False)
    assert server.requests == 4  # 2 batches x 2 tries: bounded
    assert (summary.scored, summary.failed, summary.not_sent) == (0, 8, 12)
    assert "12 not sent" in caplog.text


# -- faults that stop the run --------------------------------------------------------------------------


@pytest.mark.parametrize(("action", "message"), [
    ("short", "answered 9 scores for 10 passages"),
    ("text", "not a number in [0, 1]"),
    ("notjson", "not JSON"),
])
def test_a_malformed_answer_stops_naming_the_batch(tmp_path, server, action, message):
    corpus, by_sentence = make_corpus(tmp_path / "c.jsonl", 25)
    scores = tmp_path / "s.tsv"
    server.plan.extend(["ok", action])
    with pytest.raises(DebaterAnswerError, match=r"batch 2 \(clueweb12-test-0010___1 \.\. clueweb12-test-0019___1"
                       ) as caught:
        score_with_debater(corpus, scores, client_for(server), batch_size=10, progress=False)
    assert message in str(caught.value)
    assert server.requests == 2  # not retried
    assert len(read_lines(scores)) == 10  # batch 1 is kept


@pytest.mark.parametrize("code", [400, 302])
def test_other_http_answers_stop_without_retrying_or_following_redirects(tmp_path, server, code):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 3)
    server.plan.append(f"status:{code}")
    with pytest.raises(KueriError, match=f"batch 1 .*answered HTTP {code}"):
        score_with_debater(corpus, tmp_path / "s.tsv", client_for(server), progress=False)
    assert server.requests == 1


def test_a_bad_key_stops_at_once_and_is_never_shown(tmp_path, server, capsys, caplog):
    caplog.set_level(logging.DEBUG, logger="kueri")
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 5)
    wrong = "wrong-key-Pq77"
    with pytest.raises(DebaterKeyError, match="refused the API key") as caught:
        score_with_debater(corpus, tmp_path / "s.tsv", client_for(server, key=wrong), progress=False)
    assert isinstance(caught.value, SetupError)  # exit code 2
    assert server.requests == 1
    output = capsys.readouterr()
    assert wrong not in str(caught.value) + output.out + output.err + caplog.text
    assert wrong not in repr(client_for(server, key=wrong))


def test_a_partial_last_line_is_cut_and_its_passage_sent_again(tmp_path, server):
    corpus, by_sentence = make_corpus(tmp_path / "c.jsonl", 8)
    ids = list(by_sentence.values())
    scores = tmp_path / "s.tsv"
    scores.write_text(f"{ids[0]}\t0.500000\n{ids[1]}\t0.250000\n{ids[2]}\t0.12", encoding="utf-8")
    summary = score_with_debater(corpus, scores, client_for(server), batch_size=3, progress=False)
    assert (summary.cached, summary.scored) == (2, 6)
    assert sorted(by_sentence[s] for s in server.received) == sorted(ids[2:])
    lines = read_lines(scores)
    assert lines[:2] == [(ids[0], "0.500000"), (ids[1], "0.250000")]
    assert sorted(pid for pid, _ in lines) == sorted(ids)


def test_a_corrupt_line_inside_the_score_file_is_an_error(tmp_path, server):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 3)
    scores = tmp_path / "s.tsv"
    scores.write_text("a___1\t0.5\nnot a score line\nb___1\t0.25\n", encoding="utf-8")
    with pytest.raises(KueriError, match=r"s\.tsv:2: not 'passage_id<TAB>score'"):
        score_with_debater(corpus, scores, client_for(server), progress=False)
    assert server.requests == 0


def test_two_clients_cannot_write_one_score_file(tmp_path):
    with ScoreFile(tmp_path / "s.tsv"), pytest.raises(KueriError, match="another client"), \
            ScoreFile(tmp_path / "s.tsv"):
        pass


# -- key, Retry-After, CLI -----------------------------------------------------------------------------


def test_the_key_comes_from_the_environment_or_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DEBATER_API_KEY", " env-key \n")
    assert read_api_key() == "env-key"
    (tmp_path / "bare").write_text("file-key\n")
    (tmp_path / "secrets.txt").write_text("# the original's secrets.txt\nDEBATER_API_KEY = props-key\n")
    assert read_api_key(tmp_path / "bare") == "file-key"
    assert read_api_key(tmp_path / "secrets.txt") == "props-key"
    monkeypatch.delenv("DEBATER_API_KEY")
    with pytest.raises(SetupError, match="set DEBATER_API_KEY or pass --key-file"):
        read_api_key()
    with pytest.raises(SetupError, match="cannot read the Debater key file"):
        read_api_key(tmp_path / "missing")


def test_parse_retry_after():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT", now) == 30.0
    assert parse_retry_after("Wed, 31 Dec 2025 00:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_cli_defaults_are_the_retry_policy_defaults():
    from kueri.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["quality", "debater", "--corpus", "c", "--scores", "s"])
    policy = RetryPolicy()
    assert (args.tries, args.backoff, args.max_backoff, args.max_retry_after, args.timeout,
            args.max_failed_batches, args.batch) == (policy.tries, policy.base_delay, policy.max_delay,
                                                     policy.max_retry_after, policy.timeout,
                                                     policy.max_failed_batches, 500)


def test_cli_runs_and_reports_unscored_passages(tmp_path, server, monkeypatch, capsys):
    corpus, _ = make_corpus(tmp_path / "c.jsonl", 6)
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    monkeypatch.delenv("DEBATER_API_KEY", raising=False)
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    scores = tmp_path / "s.tsv"
    def main(argv: list[str]) -> int:
        return kueri_main(["quality", "debater", *argv])

    common = ["--corpus", str(corpus), "--scores", str(scores), "--url", server.url, "--key-file", str(key_file),
              "--batch", "3", "--quiet", "--backoff", "0.01", "--tries", "2"]
    server.plan.extend(["status:500", "status:500"])
    assert main(common) == 1  # batch 1 failed: exit 1, with the advice to rerun
    assert "3 passages have no score yet" in capsys.readouterr().err
    assert main(common) == 0
    assert len(read_lines(scores)) == 6
    assert main([*common[:6], "--quiet"]) == 2  # no key: a setup error
    assert KEY not in scores.read_text()


# -- killed and restarted ------------------------------------------------------------------------------


def test_a_killed_run_resumes_sending_only_the_missing_passages(tmp_path, server):
    corpus, by_sentence = make_corpus(tmp_path / "c.jsonl", 50)
    ids = list(by_sentence.values())
    scores = tmp_path / "s.tsv"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(DEBATER_API_KEY=KEY, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "kueri", "quality", "debater", "--corpus", str(corpus), "--scores", str(scores),
               "--url", server.url, "--batch", "10", "--quiet", "--backoff", "0.01"]
    server.plan.extend(["ok", "ok", "hold"])  # batches 1 and 2 are answered; batch 3 hangs
    client = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.held.wait(30), client.communicate(timeout=5)
        deadline = time.monotonic() + 10
        while len(scores.read_bytes().splitlines()) < 20 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait(10)
    assert client.returncode == -signal.SIGKILL
    assert [pid for pid, _ in read_lines(scores)] == ids[:20]
    # As if the kill had hit while batch 2 was being written: its last line is cut short.
    scores.write_bytes(scores.read_bytes()[:-4])
    server.release.set()
    server.received.clear()
    server.plan.clear()

    # without --quiet: the summary is an info line
    rerun = subprocess.run([c for c in command if c != "--quiet"], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    assert "cut off a partially written last line" in rerun.stderr
    assert "31 scored now" in rerun.stderr and "19 already in the score file" in rerun.stderr
    # The rerun sent exactly the passages without a score, each once (the cut one included)...
    assert Counter(by_sentence[s] for s in server.received) == Counter(ids[19:])
    # ...and the file ends with exactly one score per passage, each the service's.
    lines = read_lines(scores)
    assert sorted(pid for pid, _ in lines) == sorted(ids)
    assert {pid: value for pid, value in lines} == {pid: f"{fake_score(s):.6f}" for s, pid in by_sentence.items()}
    assert KEY not in rerun.stdout + rerun.stderr + scores.read_text()
