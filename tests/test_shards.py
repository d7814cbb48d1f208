"""kueri.lucene.shards: the parallel build and joined shards give the index one writer gives, on real Lucene."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

import pytest

from kueri.config import get_config
from kueri.errors import KueriError
from kueri.lucene import (
    MANIFEST,
    LuceneIndex,
    build_index,
    build_shard,
    check_index,
    javahelper,
    merge_indexes,
    open_shards,
)
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.feedback import FeedbackConfig, feedback_run
from kueri.lucene.index import read_manifest
from kueri.lucene.jvm import find_java_home
from kueri.lucene.writer import DocumentWriter, open_writer
from kueri.parse import PassageReader
from kueri.pipeline import search_run
from kueri.records import Passage
from tests.conftest import ROOT, SAMPLE_CORPUS

V2 = AnalyzerConfig("kueristopv2")


def runs(index: LuceneIndex, topics) -> dict:
    """Rankings that exercise both fields, the objects filter and RF (term vectors)."""
    result = {row: search_run(index, get_config(row), topics) for row in ("row-07", "row-10", "row-11")}
    result["rf"] = feedback_run(index, FeedbackConfig(missing="skip"))
    return result


@pytest.fixture(scope="module")
def parallel_index(tmp_path_factory):
    """The sample indexed on 2 Java threads (kueri's Java helper) in 4 chunks of 700 passages."""
    target = tmp_path_factory.mktemp("parallel") / "idx"
    reader = PassageReader(SAMPLE_CORPUS)
    stats = build_index(reader, target, V2, progress=False, workers=2, chunk_passages=700)
    index = LuceneIndex(target)
    yield stats, index
    index.close()


def test_parallel_build_is_the_sequential_index(parallel_index, index_factory, topics):
    stats, index = parallel_index
    sequential = index_factory(V2)  # the sample fits in one chunk: built by one writer
    assert sequential.manifest.get("build") is None
    assert index.manifest["build"] == {"workers": 2, "on": "java threads", "shards": 4, "chunk_passages": 700}
    assert stats.indexed == index.manifest["indexed"] == index.manifest["read"] == 2607
    assert index.ids == sequential.ids and index.reader.maxDoc() == 2607
    assert index.segments() == 4  # one segment per chunk, joined in chunk order
    assert check_index(index.path) is None  # Lucene's CheckIndex: every segment sound
    stored, expected = index.reader.storedFields(), sequential.reader.storedFields()
    vectors, expected_vectors = index.reader.termVectors(), sequential.reader.termVectors()
    for docid in (0, 699, 700, 1400, 2606):
        assert stored.document(docid).get("id") == expected.document(docid).get("id") == index.ids[docid]
        assert stored.document(docid).get("contents") == expected.document(docid).get("contents")
        assert vectors.get(docid, "contents").size() == expected_vectors.get(docid, "contents").size()
    # identical rankings: every score and every tie (tie order = corpus order)
    assert runs(index, topics) == runs(sequential, topics)
    assert not (index.path.parent / "idx.partial").exists()


#: Passages of :func:`first_passages`.
FIRST_PASSAGES = 300


@pytest.fixture(scope="module")
def first_passages(tmp_path_factory) -> Path:
    """The sample's first :data:`FIRST_PASSAGES` passages: a corpus of several chunks that indexes in moments, for
    tests of how a build runs rather than of the index it makes."""
    path = tmp_path_factory.mktemp("first") / "passages.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as sample:
        path.write_text("".join(islice(sample, FIRST_PASSAGES)), encoding="utf-8")
    return path


def build_in_subprocess(target: Path, env: dict[str, str], chunk_passages: int = 700,
                        corpus: Path = SAMPLE_CORPUS) -> subprocess.Popen:
    script = (
        "from kueri.lucene.analyze import AnalyzerConfig\nfrom kueri.lucene import build_index\n"
        "from kueri.parse import PassageReader\n"
        f"build_index(PassageReader({str(corpus)!r}), {str(target)!r}, AnalyzerConfig('kueristopv2'),"
        f" progress=False, workers=2, chunk_passages={chunk_passages})\n"
    )
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, **env},
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # two builds of the whole sample
def test_without_the_java_helper_one_writer_builds_the_same_index(parallel_index, topics, tmp_path):
    """KUERI_JAVA_HELPER=0: no Java threads; one writer builds the index, the same rankings."""
    _, threaded = parallel_index
    process = build_in_subprocess(tmp_path / "idx", {"KUERI_JAVA_HELPER": "0"})
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    with LuceneIndex(tmp_path / "idx") as index:
        assert index.manifest.get("build") is None  # one writer
        assert index.ids == threaded.ids
        assert runs(index, topics) == runs(threaded, topics)


def test_the_shipped_java_helper_classes_are_compiled_from_their_sources():
    """Edit a .java file without running scripts/compile_java_helper.py and this fails."""
    assert javahelper.STAMP.read_text(encoding="ascii").strip() == javahelper.sources_digest()
    assert [name for name in javahelper.CLASS_FILES if not (javahelper.CLASS_DIR / name).is_file()] == []


def test_stale_java_helper_classes_are_left_out_saying_so(tmp_path, monkeypatch, caplog):
    stamp = tmp_path / "sources.sha256"
    stamp.write_text("0" * 64 + "\n", encoding="ascii")
    monkeypatch.setattr(javahelper, "STAMP", stamp)
    javahelper.shipped_classes.cache_clear()
    try:
        assert javahelper.shipped_classes() is None
    finally:
        javahelper.shipped_classes.cache_clear()
    assert "do not match their sources (run scripts/compile_java_helper.py)" in caplog.text


def test_a_java_runtime_without_javac_runs_the_helper(first_passages, tmp_path):
    """The classes ship compiled: a JRE (here the JDK without its bin/javac) indexes on Java threads."""
    jdk = find_java_home()
    jre = tmp_path / "jre"
    (jre / "bin").mkdir(parents=True)
    for entry in jdk.iterdir():
        if entry.name != "bin":
            (jre / entry.name).symlink_to(entry)
    (jre / "bin" / "java").symlink_to(jdk / "bin" / "java")
    process = build_in_subprocess(tmp_path / "idx", {"JAVA_HOME": str(jre)}, chunk_passages=FIRST_PASSAGES // 2,
                                  corpus=first_passages)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    with LuceneIndex(tmp_path / "idx") as index:
        assert index.manifest["build"]["on"] == "java threads" and index.segments() == 2


JVM_ARGUMENTS_AFTER_A_BUILD = """
import sys
import jnius_config
from kueri.lucene import build_index
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.index import read_manifest
from kueri.lucene.jvm import find_java_home
from kueri.parse import PassageReader
assert not jnius_config.vm_running
build_index(PassageReader(sys.argv[1]), sys.argv[2], AnalyzerConfig("lucene"), chunk_passages=int(sys.argv[3]),
            workers=2, progress=False)
import jnius
print(jnius.autoclass("java.lang.management.ManagementFactory").getRuntimeMXBean().getInputArguments().toString())
"""


@pytest.mark.parametrize(("chunk", "c2_only"), [(FIRST_PASSAGES // 3, True), (5000, False)])
def test_a_build_of_many_chunks_starts_its_jvm_for_throughput(first_passages, tmp_path, chunk, c2_only):
    """Three chunks: the JVM, started by the build, compiles with C2 only; one chunk (a short job): tiered."""
    done = subprocess.run([sys.executable, "-c", JVM_ARGUMENTS_AFTER_A_BUILD, str(first_passages),
                           str(tmp_path / "i"), str(chunk)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "-Xrs" in done.stdout, done.stdout  # the JVM's arguments, as kueri started it
    assert ("-XX:-TieredCompilation" in done.stdout) == c2_only, done.stdout
    assert read_manifest(tmp_path / "i")["indexed"] == FIRST_PASSAGES


def test_shards_joined_or_searched_as_one(tmp_path, index_factory, topics):
    passages = list(PassageReader(SAMPLE_CORPUS))
    parts = [passages[:1000], passages[1000:1001], passages[1001:]]
    shards = [tmp_path / f"shard-{i}" for i in range(len(parts))]
    for number, (part, shard) in enumerate(zip(parts, shards, strict=True)):
        assert build_shard(part, shard, V2, number=number).indexed == len(part)
    expected = runs(index_factory(V2), topics)
    with open_shards(shards) as multi:  # a MultiReader over the shards, nothing joined
        assert len(multi) == 2607 and multi.docid(passages[1000].id) == 1000
        assert runs(multi, topics) == expected
    merged = merge_indexes(shards, tmp_path / "merged")
    assert merged.indexed == 2607
    with LuceneIndex(tmp_path / "merged") as index:
        assert index.ids == [p.id for p in passages]
        assert runs(index, topics) == expected
    assert all((shard / MANIFEST).is_file() for shard in shards)  # merge_indexes copies
    with pytest.raises(KueriError, match="more than one shard"):
        merge_indexes([shards[0], shards[0]], tmp_path / "twice")


def write_corpus(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def good(i: int) -> str:
    return json.dumps({"id": f"p___{i}", "contents": f"passage {i} about laptops and word{i % 97}"})


def test_parallel_build_reports_bad_lines_like_the_reader(tmp_path):
    lines = [good(i) for i in range(3000)]
    lines[2500] = '{"id": "broken"'
    corpus = write_corpus(tmp_path / "bad.jsonl", lines)
    target = tmp_path / "idx"
    with pytest.raises(KueriError, match=r"bad\.jsonl:2501: malformed JSON"):
        build_index(PassageReader(corpus), target, AnalyzerConfig(), progress=False, workers=2, chunk_passages=600)
    assert not target.exists() and not (tmp_path / "idx.partial").exists()

    # skip_bad: a duplicate in a later chunk, an empty passage and the broken line are skipped
    lines[2900] = good(10)
    lines[1700] = json.dumps({"id": "empty___1", "contents": "  "})
    corpus = write_corpus(tmp_path / "bad.jsonl", lines)
    reference, parallel = PassageReader(corpus, skip_bad=True), PassageReader(corpus, skip_bad=True)
    expected = [p.id for p in reference]
    stats = build_index(parallel, target, AnalyzerConfig(), progress=False, workers=2, chunk_passages=600)
    assert stats.indexed == len(expected) == 2997
    assert parallel.stats == reference.stats and parallel.problems == reference.problems
    with LuceneIndex(target) as index:
        assert index.ids == expected and index.manifest["build"]["shards"] == 5


def test_killed_threaded_build_leaves_no_index(tmp_path):
    process = build_in_subprocess(tmp_path / "idx", {}, chunk_passages=200)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("idx.partial/shards/*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob("idx.partial/shards/*")), "the build never started"
    process.kill()
    process.wait()
    assert not (tmp_path / "idx" / MANIFEST).exists()
    with pytest.raises(KueriError):
        LuceneIndex(tmp_path / "idx")


def test_an_empty_expansion_field_is_left_out_with_the_same_scores(tmp_path, topics):
    """Passages without a DocT5Query expansion get no docT5Query field instead of an empty one."""
    passages = [Passage(p.id, p.contents, f"query about {p.contents.split()[0]}" if i % 3 else "")
                for i, p in enumerate(islice(PassageReader(SAMPLE_CORPUS), 600))]
    config = AnalyzerConfig()
    build_index(passages, tmp_path / "new", config, progress=False, workers=1)
    # the former way: every document has the field, empty or not
    old_style = tmp_path / "old-style"
    old_style.mkdir()
    writer = open_writer(old_style, config)
    documents = DocumentWriter(writer)
    for passage in passages:
        documents.id_field.setStringValue(passage.id)
        documents.contents_field.setStringValue(passage.contents)
        documents.query_field.setStringValue(passage.doct5query)
        writer.addDocument(documents.expanded)
    writer.commit()
    writer.close()
    for name in ("ids.txt", MANIFEST):
        (old_style / name).write_text((tmp_path / "new" / name).read_text())
    with LuceneIndex(tmp_path / "new") as new, LuceneIndex(old_style) as old:
        for field in ("contents", "docT5Query"):
            assert new.reader.getSumTotalTermFreq(field) == old.reader.getSumTotalTermFreq(field)
            documents_with_field = 600 if field == "contents" else 400
            assert new.reader.getDocCount(field) == old.reader.getDocCount(field) == documents_with_field
        for row in ("row-01", "row-11", "row-13"):
            config_row = get_config(row).with_changes(analyzer=config)
            assert search_run(new, config_row, topics) == search_run(old, config_row, topics)
