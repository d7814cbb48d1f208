"""Build the web-passage stance set (``kueri/resources/training/web-passages/``) from its writers' and labellers'
files; its README says how the set was made, this script is the mechanical part.

    python scripts/build_web_passages.py candidates WRITTEN OUT     # writers' files -> candidates + labelling chunks
    python scripts/build_web_passages.py finish OUT LABELS          # candidates + labellers' files -> the set

``candidates``: every writer's JSON lines (``WRITTEN/<writer>/<domain>.jsonl``: ``object_1``, ``object_2``,
``text``, ``stance`` (the label the writer meant), ``domain``, ``style``, ``situations``, ``writer``) get an id;
passages outside 40-250 words, passages sharing an 8-word sequence with a passage of the shipped sample, pairs of
the 50 shipped topics and near-duplicates (:func:`near_duplicates`) are dropped. ``OUT/candidates.jsonl`` keeps
everything; ``OUT/to-label/chunk-N.jsonl`` holds only ``id``, ``object_1``, ``object_2`` and ``text``, shuffled
across writers: what a labeller sees, with the guide (docs/stance.md), and nothing else.

``finish``: the labellers' files (``LABELS/*.jsonl``: ``id``, ``stance``) give the gold label; the writer's is
kept as ``writer_stance``. A writer's name is its part and a number: ``train-3`` wrote ``train.jsonl``; writers
``frozen-*`` wrote only the frozen fifth of the pairs (``frozen.jsonl``, the adoption's test, recorded by checksum
before any training), ``second-frozen-*`` the second frozen part (``second-frozen.jsonl``), and so on. Prints the
agreement (Cohen's kappa) and the set's figures.

A new part is written beside the shipped set (``--target``): its passages get ids after the set's, and a passage
whose pair is already in the set, or which near-duplicates one of its passages, is dropped (a part the set already
has is rebuilt as it was).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from lxml import etree

from kueri import resources
from kueri.records import STANCES as LABELS
from kueri.train.data import WEB

SAMPLE = resources.sample()
MIN_WORDS, MAX_WORDS = 40, 250
#: Word sequences of this length shared with a sample passage betray a copy or a close paraphrase.
SHARED_WORDS = 8
#: Passages whose 5-word shingles overlap this much (Jaccard) count as near-duplicates.
NEAR_DUPLICATE = 0.5
CHUNKS = 7
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def shingles(text: str, n: int) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def sample_sequences() -> set[tuple[str, ...]]:
    """Every 8-word sequence of the shipped sample's passages."""
    found: set[tuple[str, ...]] = set()
    with gzip.open(SAMPLE / "passages.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            found |= shingles(json.loads(line)["contents"], SHARED_WORDS)
    return found


def topic_pairs() -> set[frozenset[str]]:
    """The object pairs of the 50 shipped topics, lower-cased."""
    tree = etree.parse(str(SAMPLE / "topics.xml"))
    return {frozenset(o.strip().lower() for o in text.split(", ")) for text in tree.xpath("//objects/text()")}


def pair_of(row: dict) -> frozenset[str]:
    return frozenset((row["object_1"].lower(), row["object_2"].lower()))


def part_of(writer: str) -> str:
    """The part of the set a writer wrote: its name without the number (``second-frozen-2`` -> ``second-frozen``)."""
    return writer.rsplit("-", 1)[0]


def shipped_parts(target: Path) -> dict[str, list[dict]]:
    """The parts of the set in ``target`` (``train``, ``frozen``, ...), each its rows."""
    return {path.stem: read_lines([path]) for path in sorted(target.glob("*.jsonl"))}


def near_duplicates(texts: Sequence[str]) -> list[tuple[int, int, float]]:
    """Pairs (i, j, Jaccard) of texts whose 5-word shingles overlap at least :data:`NEAR_DUPLICATE`."""
    sets = [shingles(t, 5) for t in texts]
    holders: dict[tuple[str, ...], list[int]] = collections.defaultdict(list)
    for i, s in enumerate(sets):
        for shingle in s:
            holders[shingle].append(i)
    shared: collections.Counter[tuple[int, int]] = collections.Counter()
    for owners in holders.values():
        if 1 < len(owners) < 50:
            for a in range(len(owners)):
                for b in range(a + 1, len(owners)):
                    shared[owners[a], owners[b]] += 1
    found = []
    for (i, j), n in shared.items():
        jaccard = n / (len(sets[i]) + len(sets[j]) - n)
        if jaccard >= NEAR_DUPLICATE:
            found.append((i, j, jaccard))
    return found


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float:
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    a, b = collections.Counter(first), collections.Counter(second)
    expected = sum(a[label] * b[label] for label in LABELS) / (n * n)
    return (observed - expected) / (1 - expected)


def read_lines(paths: Iterable[Path]) -> list[dict]:
    rows = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{number}: not JSON ({exc})") from None
    return rows


def candidates(written: Path, out: Path, target: Path, count: int = CHUNKS) -> None:
    rows = read_lines(sorted(written.glob("*/*.jsonl")))
    shipped, topics = sample_sequences(), topic_pairs()
    existing = [row for name, part in shipped_parts(target).items()
                if name not in {part_of(r["writer"]) for r in rows} for row in part]  # what a new part must avoid
    existing_pairs = {pair_of(r) for r in existing}
    kept, dropped = [], collections.Counter()
    for row in rows:
        length = len(row["text"].split())
        if row.get("stance") not in LABELS:
            dropped["no writer label"] += 1
        elif not MIN_WORDS <= length <= MAX_WORDS:
            dropped[f"outside {MIN_WORDS}-{MAX_WORDS} words"] += 1
        elif pair_of(row) in topics:
            dropped["a shipped topic's pair"] += 1
        elif pair_of(row) in existing_pairs:
            dropped["a pair the set has"] += 1
        elif shingles(row["text"], SHARED_WORDS) & shipped:
            dropped["shares 8 words with the sample"] += 1
        else:
            kept.append(row)
    # An earlier round's passages keep their ids (their labels are keyed by them); a new round's come after.
    earlier = {row["text"]: row["id"] for row in read_lines([out / "candidates.jsonl"])} \
        if (out / "candidates.jsonl").exists() else {}
    kept.sort(key=lambda row: (row["text"] not in earlier, earlier.get(row["text"], "")))
    texts = [row["text"] for row in kept]
    duplicate = {j for _, j, _ in near_duplicates(texts)}
    duplicate |= {i for i, j, _ in near_duplicates(texts + [r["text"] for r in existing]) if j >= len(texts) > i}
    dropped["near-duplicate"] += len(duplicate)
    kept = [row for i, row in enumerate(kept) if i not in duplicate]
    number = max((int(i.split("-")[1]) for i in [*earlier.values(), *(r["id"] for r in existing)]), default=0)
    for row in kept:
        if row["text"] in earlier:
            row["id"] = earlier[row["text"]]
        else:
            number += 1
            row["id"] = f"web-{number:05d}"
        row["batch"] = f"{row['writer']}/{row['domain']}"
        row.setdefault("round", "first")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "candidates.jsonl", "w", encoding="utf-8") as handle:
        for row in kept:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    shuffled = [row for row in kept if row["text"] not in earlier]  # what no labeller has seen yet
    random.Random(2012).shuffle(shuffled)
    chunks = out / "to-label" / f"round-{len({row['round'] for row in kept})}"
    chunks.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        with open(chunks / f"chunk-{k + 1}.jsonl", "w", encoding="utf-8") as handle:
            for row in shuffled[k::count]:
                item = {key: row[key] for key in ("id", "object_1", "object_2", "text")}
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"{len(rows)} written, {len(kept)} kept ({len(shuffled)} new: {chunks}); dropped: {dict(dropped)}")


def finish(out: Path, labels_dir: Path, target: Path) -> None:
    rows = read_lines([out / "candidates.jsonl"])
    gold = {row["id"]: row["stance"] for row in read_lines(sorted(labels_dir.glob("*.jsonl")))}
    missing = [row["id"] for row in rows if gold.get(row["id"]) not in LABELS]
    if missing:
        raise SystemExit(f"{labels_dir}: {len(missing)} passages without a valid label, e.g. {missing[:5]}")
    keys = ("id", "object_1", "object_2", "text", "stance", "writer_stance", "domain", "style", "situations",
            "writer", "batch", "round")
    parts: dict[str, list[dict]] = {}
    for row in rows:
        row["writer_stance"], row["stance"] = row["stance"], gold[row["id"]]
        parts.setdefault(part_of(row["writer"]), []).append({k: row[k] for k in keys})
    target.mkdir(parents=True, exist_ok=True)
    for name, part in parts.items():
        with open(target / f"{name}.jsonl", "w", encoding="utf-8") as handle:
            for row in part:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{name}.jsonl: {len(part)} passages, sha256 "
              f"{hashlib.sha256((target / f'{name}.jsonl').read_bytes()).hexdigest()}")
    report([row for part in parts.values() for row in part])


def report(rows: list[dict]) -> None:
    writer, labeller = [r["writer_stance"] for r in rows], [r["stance"] for r in rows]
    print(f"passages {len(rows)}, pairs {len({pair_of(r) for r in rows})}, domains {len({r['domain'] for r in rows})}")
    print(f"agreement writer/labeller {sum(a == b for a, b in zip(writer, labeller, strict=True)) / len(rows):.3f}, "
          f"Cohen's kappa {cohen_kappa(writer, labeller):.3f}")
    parts: dict[str, list[dict]] = {}
    for r in rows:
        parts.setdefault(part_of(r["writer"]), []).append(r)
    for name, part in {"all": rows, **parts}.items():
        mix = collections.Counter(r["stance"] for r in part)
        print(f"{name}: gold mix " + ", ".join(f"{label} {mix[label] / len(part):.3f}" for label in LABELS))
    confusion = collections.Counter(zip(writer, labeller, strict=True))
    print("writer \\ labeller " + " ".join(f"{label:>8s}" for label in LABELS))
    for a in LABELS:
        print(f"{a:17s} " + " ".join(f"{confusion[a, b]:8d}" for b in LABELS))
    lengths = sorted(len(r["text"].split()) for r in rows)
    print(f"words: median {lengths[len(lengths) // 2]}, min {lengths[0]}, max {lengths[-1]}")
    print("styles: " + ", ".join(f"{k} {v}" for k, v in collections.Counter(r["style"] for r in rows).most_common()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    first = sub.add_parser("candidates")
    first.add_argument("written", type=Path)
    first.add_argument("out", type=Path)
    first.add_argument("--chunks", type=int, default=CHUNKS, help="labelling chunks, one a labeller (%(default)s)")
    last = sub.add_parser("finish")
    last.add_argument("out", type=Path)
    last.add_argument("labels", type=Path)
    for command in (first, last):
        command.add_argument("--target", type=Path, default=WEB,
                             help="the set's folder (%(default)s)")
    args = parser.parse_args(argv)
    if args.command == "candidates":
        candidates(args.written, args.out, args.target, args.chunks)
    else:
        finish(args.out, args.labels, args.target)
    return 0

