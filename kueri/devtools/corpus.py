"""Generate a deterministic synthetic corpus in the official Touché 2022 Task 2 passage format.

    python scripts/make_corpus.py --passages 868655 --out work/bench/synthetic-868655.jsonl.gz
    python scripts/make_corpus.py --passages 20000 --out small.jsonl.gz --doct5query --seed 7

One JSON object per line, ``{"id": "clueweb12-0043wb-07-01234___3", "contents": "...",
"chatNoirUrl": "https://chatnoir.eu/cache?uuid=...&index=cw12&raw&plain"}`` (``null`` for ~5% of
the documents, as in the real data), sorted by id as the official file is: by ClueWeb12 document
id, then by passage number as a number (``___9`` before ``___10``). ``--doct5query`` appends one
DocT5Query-style generated query to every passage, ``...text.<query> generated query</query>``.

What makes the passages resemble the real ones (the full corpus is not available to us):

* **text**: runs of 1-3 consecutive sentences of the shipped real sample
  (``kueri/resources/sample/passages.jsonl.gz``, 2,607 passages, 17.9k sentences), so word forms,
  punctuation, casing and sentence shapes are real;
* **length**: every passage's length in words is drawn from the sample's own lengths (mean 156,
  1%/50%/99% 97/144/364 words), so the distribution is the real one;
* **vocabulary growth**: sampled sentences alone would stop adding new words once the sample's
  27.8k word types are used up, while real text keeps growing by Heaps' law ``V = K * n^beta``.
  Fitted on the sample's ``\\w+`` tokens (lower case, 10k-415k tokens): ``K = 13.55, beta = 0.591``
  (the constants below). Novel word forms (invented names, codes, compounds, each a pure
  function of its number) are injected so that the number of types after ``n`` tokens follows the
  law; half of the injected slots reuse an earlier novel form so the rare words recur. At 868,655
  passages this gives ~0.87M types.

Determinism: the corpus is cut into blocks of :data:`BLOCK` passages; block ``b`` is generated
from its own ``random.Random((seed, b))``, knows its place in the corpus (passage numbers, the
Heaps target) without its predecessors, and is compressed as its own gzip member. The output is
the same bytes for the same arguments, whatever ``--workers`` is. 868,655 passages: about a
minute on 2 cores.
"""

from __future__ import annotations

import gzip
import json
import math
import multiprocessing
import os
import random
import re
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kueri import resources
from kueri.cli.script import script_parser

DEFAULT_SOURCE = resources.sample() / "passages.jsonl.gz"

#: Passages per independently seeded block (the unit of determinism and of parallel work).
BLOCK = 10_000
#: Heaps' law fitted on the shipped sample: types = HEAPS_K * tokens ** HEAPS_BETA (\w+, lower case).
HEAPS_K = 13.55
HEAPS_BETA = 0.591
#: \w+ tokens per whitespace word in the sample (415,513 / 406,580): converts words to tokens.
TOKENS_PER_WORD = 1.022
#: Share of documents whose chatNoirUrl is null in the sample (126 of 2,607 passages).
NULL_URL_RATE = 0.048
#: Mean passages per ClueWeb12 document (geometric); only shapes the ids.
PASSAGES_PER_DOC = 4.0

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"\w+")

CONSONANTS = "bcdfghjklmnprstvwxz"
VOWELS = "aeiou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS]  # 95
QUERY_STARTS = ("", "what is", "how to", "is", "does", "why is", "what are", "can", "which", "how do")


@dataclass(frozen=True)
class Source:
    """What blocks are generated from: the sample's sentences (as word lists) and lengths."""

    sentences: list[list[str]]
    lengths: list[int]
    words: int  # whitespace words in the sample
    types: int  # \w+ types (lower case) in the sample


def load_source(path: str | Path = DEFAULT_SOURCE) -> Source:
    sentences: list[list[str]] = []
    lengths: list[int] = []
    types: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            contents = json.loads(line)["contents"]
            lengths.append(len(contents.split()))
            types.update(WORD.findall(contents.lower()))
            for sentence in SENTENCE_END.split(contents):
                words = sentence.split()
                if words:
                    sentences.append(words)
    return Source(sentences, lengths, sum(lengths), len(types))


def heaps_types(passages: float, mean_words: float) -> float:
    """Types Heaps' law expects after ``passages`` passages of ``mean_words`` words."""
    return HEAPS_K * (passages * mean_words * TOKENS_PER_WORD) ** HEAPS_BETA if passages > 0 else 0.0


def novel_types_before(index: int, source: Source) -> int:
    """Novel forms introduced before passage ``index``: the law's types beyond the sample's own."""
    mean_words = source.words / len(source.lengths)
    return max(0, math.floor(heaps_types(index, mean_words)) - source.types)


def novel_form(number: int) -> str:
    """The ``number``-th novel word form: its stem (3+ syllables) is unique per number, so every
    form is a new ``\\w+`` type in lower case; decorated like web text's rare words."""
    syllables = []
    rest = number
    while True:
        syllables.append(SYLLABLES[rest % len(SYLLABLES)])
        rest //= len(SYLLABLES)
        if rest == 0 and len(syllables) >= 3:
            break
    stem = "".join(syllables)
    kind = (number * 7919) % 4  # decoupled from the stem's first syllable
    if kind == 0:
        return stem.capitalize()  # a name: "Bakodu"
    if kind == 1:
        return stem  # a coinage or typo-like form: "bakodu"
    if kind == 2:
        return f"{stem[:3]}{number % 997}{stem[3:]}"  # a code: "bak41odu"
    return f"{stem}'s"  # a possessive: "bakodu's"


def _chatnoir_url(rng: random.Random) -> str | None:
    if rng.random() < NULL_URL_RATE:
        return None
    return f"https://chatnoir.eu/cache?uuid={uuid.UUID(int=rng.getrandbits(128), version=5)}&index=cw12&raw&plain"


def _query(rng: random.Random, words: list[str]) -> str:
    content = [token for word in words for token in WORD.findall(word.lower()) if len(token) > 3 and token.isalpha()]
    start = rng.choice(QUERY_STARTS)
    picked = [content[rng.randrange(len(content))] for _ in range(rng.randint(2, 5))] if content else ["what"]
    return " ".join(([start] if start else []) + picked)


def block_passages(source: Source, seed: int, block: int, count: int, segment: int, doct5query: bool = False,
                   ) -> Iterator[tuple[str, str, str | None]]:
    """(id, contents, chatNoirUrl) of passages ``block * BLOCK`` .. ``+ count``, in id order."""
    rng = random.Random(f"{seed}:{block}")  # a str seed: stable across Python versions and runs
    sentences, lengths = source.sentences, source.lengths
    n_sentences = len(sentences)
    first = block * BLOCK
    novel_before = novel_types_before(first, source)
    doc = record = 0
    file = -1
    emitted = 0
    while emitted < count:
        # one ClueWeb12 document: ids increase; at most 100 documents per file keep records < 100000
        doc_file = min(99, doc * 100 // BLOCK)
        record = record + rng.randint(1, 999) if doc_file == file else rng.randint(0, 999)
        file = doc_file
        doc_id = f"clueweb12-{segment:04d}wb-{file:02d}-{record:05d}"
        url = _chatnoir_url(rng)
        passages_in_doc = min(count - emitted, 1 + int(rng.expovariate(1 / (PASSAGES_PER_DOC - 1))))
        for number in range(1, passages_in_doc + 1):
            index = first + emitted
            novel_after = novel_types_before(index + 1, source)
            new_forms = novel_after - novel_before
            # every new form comes with one reuse of an earlier form, so rare words recur
            injected = [novel_form(j) for j in range(novel_before, novel_after)]
            if novel_before:
                injected += [novel_form(rng.randrange(novel_before)) for _ in range(new_forms)]
            novel_before = novel_after
            target = max(1, lengths[rng.randrange(len(lengths))] + rng.randint(-3, 3)) - len(injected)
            words: list[str] = []
            while len(words) < target:  # runs of consecutive sentences: locally coherent text
                start = rng.randrange(n_sentences)
                for k in range(rng.randint(1, 3)):
                    words.extend(sentences[(start + k) % n_sentences])
            del words[max(target, 1):]
            for form in injected:
                words.insert(rng.randint(0, len(words)), form)
            contents = " ".join(words)
            if doct5query:
                contents += f"<query> {_query(rng, words)}</query>"
            yield f"{doc_id}___{number}", contents, url
            emitted += 1
        doc += 1


def block_bytes(args: tuple[Source, int, int, int, int, bool, int]) -> bytes:
    """One block as a complete gzip member (concatenated members are one valid gzip file)."""
    source, seed, block, count, segment, doct5query, level = args
    lines = [
        json.dumps({"id": pid, "contents": contents, "chatNoirUrl": url})
        for pid, contents, url in block_passages(source, seed, block, count, segment, doct5query)
    ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    return gzip.compress(data, compresslevel=level, mtime=0) if level else data


def segments(blocks: int) -> list[int]:
    """The 4-digit ClueWeb12 segment of each block: increasing, spread over 0000-1913 when possible."""
    if blocks > 10_000:
        raise SystemExit(f"at most {10_000 * BLOCK} passages")
    step = max(1, 1914 // blocks)
    return [b * step for b in range(blocks)]


def make_corpus(passages: int, out: str | Path, *, seed: int = 0, doct5query: bool = False, workers: int = 0,
                source: str | Path = DEFAULT_SOURCE, level: int = 6) -> Path:
    """Write the corpus to ``out`` (gzip when it ends with .gz) via ``out.partial``; returns ``out``."""
    out = Path(out)
    src = load_source(source)
    blocks = math.ceil(passages / BLOCK)
    level = level if out.name.endswith(".gz") else 0
    tasks = [
        (src, seed, b, min(BLOCK, passages - b * BLOCK), seg, doct5query, level)
        for b, seg in zip(range(blocks), segments(blocks), strict=True)
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    workers = workers or min(os.cpu_count() or 1, blocks)
    with open(partial, "wb") as handle:
        if workers <= 1:
            for task in tasks:
                handle.write(block_bytes(task))
        else:
            # fork: the source is shared copy-on-write; pickling it per task would cost more than a block
            with multiprocessing.get_context("fork").Pool(workers, initializer=_init_worker, initargs=(src,)) as pool:
                for data in pool.imap(_block_bytes_shared, [t[1:] for t in tasks]):
                    handle.write(data)
    os.replace(partial, out)
    return out


_SHARED: Source | None = None


def _init_worker(source: Source) -> None:
    global _SHARED
    _SHARED = source


def _block_bytes_shared(args: tuple[int, int, int, int, bool, int]) -> bytes:
    assert _SHARED is not None
    return block_bytes((_SHARED, *args))


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--passages", type=int, default=868_655, help="number of passages (868,655: the official size)")
    parser.add_argument("--out", required=True, help="output file (.jsonl.gz or .jsonl)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--doct5query", action="store_true", help="append a <query>...</query> expansion")
    parser.add_argument("--workers", type=int, default=0, help="processes (default: all cores)")
    parser.add_argument("--source", default=str(DEFAULT_SOURCE), help="real passages to draw sentences from")
    parser.add_argument("--level", type=int, default=6, help="gzip level (1-9)")
    args = parser.parse_args(argv)
    if args.passages < 1:
        parser.error("--passages must be positive")
    started = time.perf_counter()
    out = make_corpus(args.passages, args.out, seed=args.seed, doct5query=args.doct5query, workers=args.workers,
                      source=args.source, level=args.level)
    print(f"wrote {args.passages} passages to {out} ({out.stat().st_size / 1e6:.1f} MB) "
          f"in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0

