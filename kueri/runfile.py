"""Read and write Touché / TREC run files and qrels.

Run file lines are ``qid STANCE doc rank score tag``. Writing is byte-compatible with the original
Java system (scores as ``String.format(Locale.ENGLISH, "%.6f", score)``). Reading is tolerant of
what real submissions contain: tabs or runs of spaces, gzip files, ``Q0`` in the stance column and
a tag that is a quoted string with spaces (``1.0 "Colbert edinburg"``). Anything else that is
malformed raises :class:`KueriError` naming ``file:line`` and the problem.

Public API:

* :func:`format_score`, :func:`format_run_lines`, :func:`write_run`
* :func:`iter_run_lines` (every field of every line, with its line number),
  :func:`read_run_ranked` (hits with their rank column, for fusion by rank),
  :func:`read_run`, :func:`read_run_with_tag`
* :func:`read_qrels` (``qid iter doc grade``), :func:`read_stance_qrels`
"""

from __future__ import annotations

import gzip
import io
import math
import os
from collections.abc import Iterable, Iterator
from decimal import ROUND_HALF_UP, Context, Decimal
from pathlib import Path
from typing import IO, NamedTuple

from kueri.errors import KueriError
from kueri.files import atomic_writer
from kueri.records import NO_STANCE, STANCES, Hit, Run

StrPath = str | os.PathLike[str]

#: Labels accepted in the stance column of a run (``Q0``: no stance given).
RUN_STANCES = frozenset((*STANCES, NO_STANCE))

_SIX_PLACES = Decimal("0.000001")
# Enough precision that quantize never overflows (a double has at most 309 integer digits).
_DECIMAL_CONTEXT = Context(prec=400, rounding=ROUND_HALF_UP)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def format_score(x: float) -> str:
    """``x`` with 6 decimals, exactly as Java's ``String.format(Locale.ENGLISH, "%.6f", x)``.

    Java rounds the *shortest decimal representation* of the double (``Double.toString``'s
    digits, which Python's ``repr`` also produces) HALF_UP, whereas Python's ``"%.6f"`` rounds
    the exact binary value: ``123.4567895`` is ``123.456790`` in Java but ``123.456789`` with
    ``%`` (its double is slightly below the written digits), ``5e-07`` is ``0.000001`` vs
    ``0.000000``. The sign of negative values is kept, also when they round to zero: Java prints
    ``-0.000000`` for ``-0.0`` and for ``-1e-9``; we do the same to stay byte-identical.
    """
    if not math.isfinite(x):  # Java's spellings; runs should never hold these, but never crash
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    text = repr(float(x))
    # Fast path: at most 6 decimals in the shortest representation means no rounding is needed
    # (formatting such a double with .6f prints exactly those digits, zero-padded).
    # Below 1e9 a double's ulp is under 1.2e-7, so the binary value is within 6e-8 of those
    # digits and rounds back to them; larger magnitudes take the exact path.
    dot = text.find(".")
    if "e" not in text and len(text) - dot - 1 <= 6 and -1e9 < x < 1e9:
        return f"{x:.6f}"
    quantized = Decimal(text).quantize(_SIX_PLACES, context=_DECIMAL_CONTEXT)
    return format(quantized, "f")


def _check_field(value: str, what: str, qid: str) -> None:
    # A field with whitespace would shift the columns of the line: refuse to write it.
    if not value or value.split() != [value]:
        raise KueriError(f"run topic {qid}: {what} {value!r} is empty or contains whitespace")


def format_run_lines(run: Run, tag: str) -> Iterator[str]:
    """The lines (with ``\\n``) of ``run``: topics in dict order, ranks renumbered 1..n."""
    tag = tag.strip()
    if not tag or "\n" in tag or "\r" in tag:
        raise KueriError(f"run tag {tag!r} is empty or contains a line break")
    for qid, hits in run.items():
        _check_field(qid, "topic number", qid)
        for rank, hit in enumerate(hits, start=1):
            _check_field(hit.doc, "doc id", qid)
            if hit.stance not in RUN_STANCES:
                raise KueriError(f"run topic {qid}: unknown stance {hit.stance!r} for {hit.doc}")
            yield f"{qid} {hit.stance} {hit.doc} {rank} {format_score(hit.score)} {tag}\n"


def _write_text(binary: IO[bytes], lines: Iterable[str]) -> int:
    out = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
    count = 0
    for line in lines:
        out.write(line)
        count += 1
    out.flush()
    out.detach()  # leave ``binary`` open: the caller closes it
    return count


def write_lines_atomic(path: StrPath, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``path`` atomically; return how many were written.

    The text goes to a temporary file in the same directory (so ``os.replace`` is a rename on
    one filesystem) which replaces ``path`` only once complete: a crash or an exception raised
    by ``lines`` leaves ``path`` as it was (absent or the previous file). ``.gz`` paths are
    gzip-compressed.
    """
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        raise KueriError(f"{target}: folder {directory} does not exist")
    with atomic_writer(target) as raw:
        if target.suffix == ".gz":
            # mtime=0: the same run gives the same bytes; closing it writes the gzip trailer
            # but leaves ``raw`` open for the fsync.
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as compressed:
                return _write_text(compressed, lines)
        return _write_text(raw, lines)


def write_run(run: Run, path: StrPath, tag: str) -> int:
    """Write ``run`` to ``path`` atomically (see :func:`write_lines_atomic`); return line count.

    One line per hit, ``qid STANCE doc rank score tag`` with single spaces; ranks are renumbered
    1..n in list order and topics are written in dict order.
    """
    return write_lines_atomic(path, format_run_lines(run, tag))


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


class RunLine(NamedTuple):
    """Every field of one run file line; ``line`` is its 1-based line number (for messages)."""

    qid: str
    stance: str
    doc: str
    rank: int
    score: float
    tag: str
    line: int


def _open_text(path: StrPath) -> IO[str]:
    """Open a text file for reading, gunzipping it when it starts with the gzip magic bytes."""
    try:
        with open(path, "rb") as probe:
            gzipped = probe.read(2) == b"\x1f\x8b"
    except FileNotFoundError:
        raise KueriError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise KueriError(f"{path}: is a folder, not a file") from None
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - the caller closes it


def _numbered_fields(path: StrPath, maxsplit: int = -1) -> Iterator[tuple[int, list[str]]]:
    """(line number, whitespace-split fields) of the non-blank lines of ``path``."""
    with _open_text(path) as lines:
        number = 0
        try:
            for number, line in enumerate(lines, start=1):  # noqa: B007 - used after the loop
                fields = line.split(None, maxsplit)
                if fields:
                    yield number, fields
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            # gzip / decoding failures happen while iterating: say where.
            raise KueriError(f"{path}:{number + 1}: unreadable ({exc})") from None


def _qrels_lines(path: StrPath, layout: str) -> Iterator[tuple[str, list[str]]]:
    """(``path:line``, its 4 fields) of a qrels file; another number of fields is an error naming ``layout``."""
    for number, fields in _numbered_fields(path):
        where = f"{path}:{number}"
        if len(fields) != 4:
            raise KueriError(f"{where}: expected 4 fields '{layout}', got {len(fields)}")
        yield where, fields


def _unquote(tag: str) -> str:
    tag = tag.strip()
    if len(tag) >= 2 and tag[0] == tag[-1] and tag[0] in "\"'":
        return tag[1:-1]
    return tag


def iter_run_lines(path: StrPath) -> Iterator[RunLine]:
    """Parse the run file ``path`` line by line (blank lines skipped).

    The tag is everything after the score, with surrounding quotes removed, so a quoted tag
    with spaces is one tag. Stance labels are upper-cased; ``Q0`` is kept as ``Q0``.
    """
    for number, fields in _numbered_fields(path, maxsplit=5):
        where = f"{path}:{number}"
        if len(fields) < 6:
            raise KueriError(
                f"{where}: expected 6 fields 'qid STANCE doc rank score tag', got {len(fields)}"
            )
        qid, stance, doc, rank_text, score_text, tag = fields
        stance = stance.upper()
        if stance not in RUN_STANCES:
            raise KueriError(
                f"{where}: unknown stance label {fields[1]!r} "
                f"(expected one of {', '.join(STANCES)} or {NO_STANCE})"
            )
        try:
            rank = int(rank_text)
        except ValueError:
            raise KueriError(f"{where}: rank {rank_text!r} is not an integer") from None
        try:
            score = float(score_text)
        except ValueError:
            raise KueriError(f"{where}: score {score_text!r} is not a number") from None
        if not math.isfinite(score):
            raise KueriError(f"{where}: score {score_text!r} is not a finite number")
        yield RunLine(qid, stance, doc, rank, score, _unquote(tag), number)


def _read_ranked(path: StrPath) -> tuple[dict[str, list[tuple[int, Hit]]], str]:
    ranked: dict[str, list[tuple[int, Hit]]] = {}
    tag = ""
    for row in iter_run_lines(path):
        if not ranked:
            tag = row.tag
        ranked.setdefault(row.qid, []).append((row.rank, Hit(row.doc, row.score, row.stance)))
    for pairs in ranked.values():
        pairs.sort(key=lambda pair: pair[0])  # list.sort is stable: file order breaks ties
    return ranked, tag


def read_run_ranked(path: StrPath) -> dict[str, list[tuple[int, Hit]]]:
    """Topic -> ``(rank column, hit)`` pairs sorted by rank (stable: file order breaks ties).

    Topics keep the order of their first line. Use this where the rank column itself matters
    (reciprocal rank fusion ranks by it, not by the score).
    """
    return _read_ranked(path)[0]


def read_run_with_tag(path: StrPath) -> tuple[Run, str]:
    """The run in rank-column order and the tag of its first line ("" for an empty file)."""
    ranked, tag = _read_ranked(path)
    return {qid: [hit for _, hit in pairs] for qid, pairs in ranked.items()}, tag


def read_run(path: StrPath) -> Run:
    """The run file ``path`` as a :data:`Run`: hits of each topic in rank-column order."""
    return read_run_with_tag(path)[0]


def read_qrels(path: StrPath) -> dict[str, dict[str, int]]:
    """TREC qrels ``qid iter doc grade`` -> ``{qid: {doc: grade}}``.

    A repeated (qid, doc) with the same grade is accepted; with a different grade it is an
    error, since trec_eval would silently use only one of them.
    """
    qrels: dict[str, dict[str, int]] = {}
    for where, fields in _qrels_lines(path, "qid iter doc grade"):
        qid, _, doc, grade_text = fields
        try:
            grade = int(grade_text)
        except ValueError:
            raise KueriError(f"{where}: grade {grade_text!r} is not an integer") from None
        judged = qrels.setdefault(qid, {})
        if judged.get(doc, grade) != grade:
            raise KueriError(f"{where}: {qid} {doc} judged again with a different grade")
        judged[doc] = grade
    return qrels


def read_stance_qrels(path: StrPath) -> dict[str, dict[str, str]]:
    """Stance qrels -> ``{qid: {doc: label}}`` with labels among FIRST, SECOND, NEUTRAL, NO.

    The official ``touche-task2-2022-stance.qrels`` is ``qid 0 doc LABEL`` (label in the 4th
    column, as ir_datasets reads it); the run-like ``qid LABEL doc grade`` is accepted too.
    ``Q0`` as a label means no stance and is read as ``NO``.
    """
    labels = frozenset(STANCES)
    qrels: dict[str, dict[str, str]] = {}
    for where, fields in _qrels_lines(path, "qid 0 doc LABEL"):
        qid, second, doc, fourth = fields
        if fourth.upper() in labels:
            label = fourth.upper()
        elif second.upper() in RUN_STANCES:
            label = second.upper()
        elif fourth.upper() == NO_STANCE:
            label = NO_STANCE
        else:
            raise KueriError(
                f"{where}: no stance label (one of {', '.join(STANCES)}) in column 2 or 4"
            )
        qrels.setdefault(qid, {})[doc] = "NO" if label == NO_STANCE else label
    return qrels
