"""IBM Project Debater argument-quality client that fills a score file without losing work.

    kueri quality debater --corpus PATH --scores FILE [--batch 500] [--url URL] [--key-file FILE]
    python -m kueri.quality.debater ...        (the same, without the kueri CLI)

As the original ``ArgumentQualityVerifier``: each passage is sent as the pair (contents without
the DocT5Query suffix and without backslashes, empty topic) to ``POST .../score/``, which answers
one quality in [0, 1] per pair; the file gets ``passage_id<TAB>score`` with 6 decimals. Unlike
the original (one try, the file truncated at start), a run over 868,655 passages must survive
timeouts, rate limits and being killed:

* the score file is append-only; each batch is written in one write, flushed and fsynced;
* at start the file is read: passages with a score are not sent again, and a partially written
  last line (a kill during a write) is cut off, so its passage is sent again;
* timeouts, connection errors, HTTP 429 and 5xx are retried with exponential backoff and jitter,
  honouring ``Retry-After``, a bounded number of times per batch; a batch that still fails is
  counted as failed and the run goes on (it stops after a few failed batches in a row);
* a refused key (401/403) or a malformed answer stops the run at once, naming the batch;
* a lock on the score file keeps two clients from writing it at the same time.

The API key comes from ``DEBATER_API_KEY`` or ``--key-file``; it is never printed, logged or written.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import requests

from kueri.errors import KueriError, SetupError
from kueri.parse.passages import PassageReader
from kueri.progress import progress_bar
from kueri.quality.features import model_text
from kueri.runfile import format_score

DEFAULT_URL = "https://arg-quality.debater.res.ibm.com/score/"
KEY_VARIABLE = "DEBATER_API_KEY"
DEFAULT_BATCH = 500

try:  # POSIX: keep a second client off the same score file
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock
    fcntl = None  # type: ignore[assignment]


log = logging.getLogger(__name__)


# -- the key ---------------------------------------------------------------------------------------


def read_api_key(key_file: str | Path | None = None) -> str:
    """The key from ``key_file`` (the bare key, or a properties file with ``DEBATER_API_KEY=...``
    as the original's ``secrets.txt``), else from the ``DEBATER_API_KEY`` environment variable."""
    if key_file is not None:
        try:
            text = Path(key_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise SetupError(f"cannot read the Debater key file {key_file}: {exc.strerror}") from None
        key = text.strip()
        for line in text.splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() == KEY_VARIABLE:
                key = value.strip()
        where = f"key file {key_file}"
    else:
        key = os.environ.get(KEY_VARIABLE, "").strip()
        where = f"${KEY_VARIABLE}"
    if not key:
        raise SetupError(f"no Debater API key: set {KEY_VARIABLE} or pass --key-file FILE "
                         f"(the key alone, or a line {KEY_VARIABLE}=...)")
    if any(c.isspace() for c in key) or not key.isascii():
        raise SetupError(f"the Debater API key in {where} contains spaces, line breaks or non-ASCII characters")
    return key


# -- talking to the service ------------------------------------------------------------------------


class DebaterKeyError(SetupError):
    """The service refused the key (401/403)."""


class DebaterAnswerError(KueriError):
    """The service answered 200 with something that is not one quality per pair."""


class DebaterUnavailable(KueriError):
    """A batch got no usable answer within the allowed tries (timeouts, 429, 5xx, dropped connections)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait and how often to retry; tests shrink the delays."""

    tries: int = 8  # per batch, the first included: a bounded loop
    base_delay: float = 2.0  # seconds before the first retry; doubles each time
    max_delay: float = 120.0  # cap of the exponential backoff
    max_retry_after: float = 900.0  # a longer Retry-After is cut to this (still bounded)
    timeout: float = 120.0  # seconds per request (connect and read)
    max_failed_batches: int = 3  # consecutive failed batches before the run stops

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Exponential backoff with "equal jitter": half fixed, half random, so clients spread out."""
        delay = min(self.max_delay, self.base_delay * 2**retry)
        return delay / 2 + rng.uniform(0.0, delay / 2)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def parse_answer(payload: object, expected: int, batch: str) -> list[float]:
    """The answer must be a JSON list of ``expected`` finite numbers in [0, 1]."""
    if not isinstance(payload, list):
        raise DebaterAnswerError(f"{batch}: the service answered a JSON {type(payload).__name__}, "
                                 "not a list of scores; stopping")
    if len(payload) != expected:
        raise DebaterAnswerError(f"{batch}: the service answered {len(payload)} scores for {expected} passages; "
                                 "stopping")
    scores: list[float] = []
    for position, value in enumerate(payload):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or not 0.0 <= value <= 1.0:
            raise DebaterAnswerError(f"{batch}: answer {position} is {json.dumps(value)[:40]}, "
                                     "not a number in [0, 1]; stopping")
        scores.append(float(value))
    return scores


class DebaterClient:
    """Scores batches of sentences, with retries; the key stays in here (and out of every message)."""

    def __init__(self, key: str, url: str = DEFAULT_URL, policy: RetryPolicy | None = None,
                 session: requests.Session | None = None, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None, on_retry: Callable[[str], None] | None = None) -> None:
        self._key = key
        self.url = url
        self.policy = policy or RetryPolicy()
        self.session = session or requests.Session()
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.on_retry = on_retry or log
        self.requests_sent = 0

    def __repr__(self) -> str:  # never the key
        return f"DebaterClient(url={self.url!r})"

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def score(self, sentences: Sequence[str], batch: str) -> list[float]:
        """One quality per sentence (topic ""). ``batch`` names the batch in messages."""
        body = json.dumps({"sentence_topic_pairs": [[s, ""] for s in sentences]}).encode("utf-8")
        headers = {"apikey": self._key, "content-type": "application/json"}
        policy = self.policy
        problem = ""
        for attempt in range(policy.tries):
            retry_after: float | None = None
            try:
                self.requests_sent += 1
                # No redirects: they would carry the apikey header to wherever the redirect points.
                response = self.session.post(self.url, data=body, headers=headers, timeout=policy.timeout,
                                             allow_redirects=False)
            except requests.Timeout:
                problem = f"no answer within {policy.timeout:g} s"
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
                problem = f"connection failed ({type(exc).__name__})"
            else:
                status = response.status_code
                if status in (401, 403):
                    raise DebaterKeyError(f"{batch}: the Debater service refused the API key (HTTP {status}): "
                                          f"check {KEY_VARIABLE} or --key-file")
                if status in (408, 429) or status >= 500:
                    problem = f"HTTP {status}"
                    retry_after = parse_retry_after(response.headers.get("Retry-After"))
                elif status != 200:
                    snippet = self._redact(response.text[:200]).strip()
                    raise KueriError(f"{batch}: the Debater service answered HTTP {status}: {snippet!r}")
                else:
                    try:
                        payload = response.json()
                    except ValueError:
                        raise DebaterAnswerError(f"{batch}: the service's answer is not JSON "
                                                 f"({self._redact(response.text[:60])!r}); stopping") from None
                    return parse_answer(payload, len(sentences), batch)
            if attempt + 1 == policy.tries:
                break
            delay = policy.backoff(attempt, self.rng)
            if retry_after is not None:  # the server knows best how long; never less than it asks
                delay = max(delay, min(retry_after, policy.max_retry_after))
            self.on_retry(f"{batch}: {problem}; retry {attempt + 1} of {policy.tries - 1} in {delay:.1f} s")
            self.sleep(delay)
        raise DebaterUnavailable(f"{batch}: no answer after {policy.tries} tries (last: {problem})")


# -- the score file --------------------------------------------------------------------------------


class ScoreFile:
    """An append-only, locked ``passage_id<TAB>score`` file; :attr:`ids` holds the scored passages."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.ids: set[str] = set()
        self.repaired_bytes = 0
        self.duplicates = 0
        self._handle: IO[bytes] | None = None

    def __enter__(self) -> ScoreFile:
        if not self.path.parent.is_dir():
            raise KueriError(f"{self.path}: folder {self.path.parent} does not exist")
        handle = open(self.path, "a+b")  # noqa: SIM115 - closed in __exit__
        self._handle = handle
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise KueriError(f"{self.path}: another client is writing this score file") from None
            self._load(handle)
        except BaseException:
            handle.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the lock
            self._handle = None

    def _load(self, handle: IO[bytes]) -> None:
        handle.seek(0)
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            # A kill during a write leaves a line without its newline: its score may be cut short,
            # so drop it (its passage is sent again) and keep the file line-aligned for appends.
            self.repaired_bytes = len(data) - end
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())
            data = data[:end]
        for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
            fields = raw.decode("utf-8", errors="replace").rstrip("\r").split("\t")
            try:
                if len(fields) != 2 or not fields[0]:
                    raise ValueError
                float(fields[1])
            except ValueError:
                raise KueriError(f"{self.path}:{number}: not 'passage_id<TAB>score': {raw[:80]!r}; "
                                 "fix or remove the line (this client only appends to the file)") from None
            if fields[0] in self.ids:
                self.duplicates += 1
            self.ids.add(fields[0])

    def append(self, scored: Sequence[tuple[str, float]]) -> None:
        """Append a batch in one write, then flush and fsync: it is on disk before we go on."""
        assert self._handle is not None
        text = "".join(f"{pid}\t{format_score(score)}\n" for pid, score in scored)
        self._handle.seek(0, os.SEEK_END)
        self._handle.write(text.encode("utf-8"))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.ids.update(pid for pid, _ in scored)


# -- a run -----------------------------------------------------------------------------------------


@dataclass
class DebaterSummary:
    """What a run did: passages scored now, found in the file, failed, and left unsent after a stop."""

    passages: int = 0
    cached: int = 0
    scored: int = 0
    failed: int = 0
    not_sent: int = 0
    failed_batches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        rate = f" ({self.scored / self.seconds:.1f} passages/s)" if self.seconds > 0 and self.scored else ""
        text = (f"Debater quality: {self.passages} passages: {self.scored} scored now{rate}, "
                f"{self.cached} already in the score file, {self.failed} failed")
        if self.not_sent:
            text += f", {self.not_sent} not sent"
        return text


def _batches(corpus: str | Path, done: set[str], size: int, skip_bad: bool) -> Iterator[list[tuple[str, str]]]:
    batch: list[tuple[str, str]] = []
    for passage in PassageReader(corpus, skip_bad=skip_bad):
        if passage.id in done:
            continue
        if "\t" in passage.id or "\n" in passage.id or "\r" in passage.id:
            raise KueriError(f"passage id {passage.id!r} contains a tab or line break: it cannot go in a score file")
        batch.append((passage.id, model_text(passage.contents)))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def score_with_debater(corpus: str | Path, scores_path: str | Path, client: DebaterClient,
                       batch_size: int = DEFAULT_BATCH, progress: bool = True,
                       skip_bad: bool = False) -> DebaterSummary:
    """Score every passage of ``corpus`` that ``scores_path`` lacks; return (and log) the summary.

    Raises :class:`DebaterKeyError` / :class:`DebaterAnswerError` (after logging the summary so far);
    a batch that stays unavailable after its retries is counted in ``failed``.
    """
    if batch_size < 1:
        raise KueriError(f"--batch must be at least 1, not {batch_size}")
    summary = DebaterSummary()
    start = time.monotonic()
    with ScoreFile(scores_path) as store:
        if store.repaired_bytes:
            log.warning("%s: cut off a partially written last line (%d bytes); its passage is sent again",
                        scores_path, store.repaired_bytes)
        if store.duplicates:
            log.warning("%s: %d passage(s) appear more than once (the last score counts)", scores_path,
                        store.duplicates)
        # A first pass counts what is left, so the progress bar can show an ETA.
        for passage in PassageReader(corpus, skip_bad=skip_bad):
            summary.passages += 1
            summary.cached += passage.id in store.ids
        todo = summary.passages - summary.cached
        bar = progress_bar("Debater quality", "passages", progress, total=todo)

        def say(message: str) -> None:
            log.warning("%s", message)

        client.on_retry = say
        failed_in_a_row = 0
        try:
            for number, batch in enumerate(_batches(corpus, store.ids, batch_size, skip_bad), start=1):
                name = f"batch {number} ({batch[0][0]} .. {batch[-1][0]}, {len(batch)} passages)"
                try:
                    scores = client.score([text for _, text in batch], name)
                except DebaterUnavailable as exc:
                    summary.failed += len(batch)
                    summary.failed_batches.append(name)
                    failed_in_a_row += 1
                    say(f"failed: {exc}")
                    bar.update(len(batch))
                    if failed_in_a_row >= client.policy.max_failed_batches:
                        say(f"stopping: {failed_in_a_row} batches in a row failed (is the service down?)")
                        break
                    continue
                failed_in_a_row = 0
                store.append([(pid, score) for (pid, _), score in zip(batch, scores, strict=True)])
                summary.scored += len(batch)
                bar.update(len(batch))
        finally:
            bar.close()
            summary.seconds = time.monotonic() - start
            summary.not_sent = max(0, todo - summary.scored - summary.failed)
            log.info("%s", summary.line())
    return summary


# -- command line ----------------------------------------------------------------------------------
