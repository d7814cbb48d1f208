import json
import subprocess
import sys
from pathlib import Path

import pytest

from kueri.errors import IncompatibleIndex, KueriError
from kueri.lucene import MANIFEST, LuceneIndex, build_index, stoplist_path
from kueri.lucene.analyze import AnalyzerConfig
from kueri.parse import PassageReader
from kueri.records import Passage
from tests.conftest import ROOT, SAMPLE_CORPUS, SAMPLE_TOPICS


def test_sample_index_counts_ids_and_stored_text(index_factory):
    index = index_factory(AnalyzerConfig("kueristopv2"))
    assert len(index) == index.reader.numDocs() == 2607
    passages = list(PassageReader(SAMPLE_CORPUS))
    assert index.ids == [p.id for p in passages]  # doc ids follow corpus order
    stored = index.reader.storedFields()
    for docid in (0, 1234, 2606):
        assert stored.document(docid).get("id") == passages[docid].id
    assert index.contents([5, 7]) == [passages[5].contents, passages[7].contents]
    assert index.docid(passages[42].id) == 42 and index.docid("nope") is None
    manifest = index.manifest
    assert manifest["indexed"] == manifest["read"] == 2607 and manifest["skipped"] == {}
    assert manifest["analyzer_config"]["stoplist"] == "kueristopv2"
    # contents has term vectors (RF reads them), docT5Query has none
    vectors = index.reader.termVectors()
    assert vectors.get(0, "contents") is not None and vectors.get(0, "docT5Query") is None


def test_failed_build_leaves_no_index_and_keeps_the_old_one(tmp_path):
    config = AnalyzerConfig("lucene")
    target = tmp_path / "idx"
    build_index([Passage("a___1", "old text")], target, config, progress=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "b___1", "contents": "fine"}\n{"id": "b___2"\n')
    with pytest.raises(KueriError, match=r"bad\.jsonl:2"):
        build_index(PassageReader(bad), target, config, progress=False)
    with LuceneIndex(target) as index:  # the previous complete index is untouched
        assert index.ids == ["a___1"]
    assert not (tmp_path / "idx.partial").exists() or not (tmp_path / "idx.partial" / MANIFEST).exists()


def test_directory_without_manifest_is_not_an_index(tmp_path):
    (tmp_path / "half").mkdir()
    with pytest.raises(KueriError, match="not a complete kueri index"):
        LuceneIndex(tmp_path / "half")
    with pytest.raises(KueriError, match="no such index"):
        LuceneIndex(tmp_path / "none")


def test_killed_build_leaves_nothing_that_opens(tmp_path):
    """SIGKILL in the middle of indexing: the target never appears as a complete index."""
    corpus = tmp_path / "big.jsonl"
    with open(corpus, "w") as out:
        for i in range(400_000):
            out.write(json.dumps({"id": f"d___{i}", "contents": f"word{i % 977} text number {i}"}) + "\n")
    target = tmp_path / "idx"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kueri", "index", "--corpus", str(corpus), "--index", str(target),
         "--config", "row-01"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    # wait until the build has really started (the progress bar reports), then kill it
    for line in iter(proc.stderr.readline, ""):
        if "passages/s" in line and "indexing" in line and "0 passages" not in line:
            break
    proc.kill()
    proc.wait()
    assert not (target / MANIFEST).exists()
    with pytest.raises(KueriError):
        LuceneIndex(target)
    # and a rerun replaces the leftover partial folder and completes
    small = tmp_path / "small.jsonl"
    small.write_text('{"id": "x___1", "contents": "hello"}\n')
    build_index(PassageReader(small), target, AnalyzerConfig("lucene"), progress=False)
    with LuceneIndex(target) as index:
        assert index.ids == ["x___1"]


def test_check_index_finds_a_damaged_segment(tmp_path):
    from kueri.lucene import check_index

    target = tmp_path / "idx"
    build_index([Passage(f"a___{i}", f"cats and dogs {i}") for i in range(1, 50)], target, AnalyzerConfig(),
                progress=False)
    assert check_index(target) is None
    postings = max(target.glob("*.doc"), key=lambda f: f.stat().st_size)  # a segment's postings
    postings.write_bytes(b"\0" * postings.stat().st_size)
    problem = check_index(target)
    assert problem is not None and str(target) in problem


# -- who wrote an index, and with which analysis ------------------------------------------------------------

V2 = AnalyzerConfig("kueristopv2")


def small_index(tmp_path, config=V2):
    target = tmp_path / "idx"
    build_index([Passage(f"a___{i}", f"laptops and desktops {i}") for i in range(1, 20)], target, config,
                progress=False)
    return target


def edit_manifest(index, **changes):
    path = index / MANIFEST
    manifest = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    path.write_text(json.dumps(manifest))


def test_the_manifest_records_kueri_lucene_and_the_analysis(tmp_path):
    from kueri import __version__
    from kueri.lucene.jvm import find_jar, jar_lucene_version, lucene

    config = AnalyzerConfig("kueristopv2")
    manifest = json.loads((small_index(tmp_path, config) / MANIFEST).read_text())
    assert manifest["kueri_version"] == __version__
    assert manifest["lucene_version"] == str(lucene().Version.LATEST.toString()) == jar_lucene_version(find_jar())
    assert manifest["lucene_version"] == "9.9.1"
    assert manifest["analysis"] == config.fingerprint()
    assert AnalyzerConfig("kueristopv2", stemmer="porter").fingerprint() != config.fingerprint()
    # where the stoplist lies does not matter, its words do
    copy = tmp_path / "kueristopv2.txt"
    copy.write_text(Path(stoplist_path("kueristopv2")).read_text())
    assert AnalyzerConfig(str(copy)).fingerprint() == config.fingerprint()
    copy.write_text(copy.read_text() + "\nlaptops\n")
    assert AnalyzerConfig(str(copy)).fingerprint() != config.fingerprint()


def test_an_index_of_another_lucene_major_is_one_line(tmp_path):
    index = small_index(tmp_path)
    edit_manifest(index, lucene_version="8.11.2")
    message = (f"{index}: written by Lucene 8.11.2, and this kueri runs Lucene 9.9.1: rebuild it with this kueri "
               "(kueri index)")
    with pytest.raises(IncompatibleIndex) as caught:
        LuceneIndex(index)
    assert str(caught.value) == message
    result = subprocess.run([sys.executable, "-m", "kueri", "search", "--index", str(index), "--topics",
                             str(SAMPLE_TOPICS), "--output", str(tmp_path / "run.txt"), "-q"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr.splitlines() == [f"kueri: error: {message}"]
    assert not (tmp_path / "run.txt").exists()
    edit_manifest(index, lucene_version="9.0.0")  # the same major: Lucene reads it as its own
    with LuceneIndex(index) as opened:
        assert len(opened) == 19


def test_an_index_of_another_analysis_than_asked_for_is_refused(tmp_path):
    index = small_index(tmp_path)
    with pytest.raises(IncompatibleIndex, match="indexed with standard tokenizer, lower case, stoplist kueristopv2, "
                       "no stemmer, but .* porter stemmer was asked for"):
        LuceneIndex(index, AnalyzerConfig("kueristopv2", stemmer="porter"))
    with LuceneIndex(index, AnalyzerConfig("kueristopv2")) as opened:
        assert len(opened) == 19
    edit_manifest(index, analysis="0123456789abcdef")  # its stoplist's words were others than they are now
    with pytest.raises(IncompatibleIndex, match="indexed with another analysis than this kueri's"):
        LuceneIndex(index)


def test_an_old_manifest_without_versions_opens_as_before(tmp_path):
    """Manifests written before the Lucene version and the analysis were recorded: the commit point says which
    Lucene wrote the index (9.9.1, the only one kueri ever pinned), and it opens."""
    index = small_index(tmp_path)
    edit_manifest(index, lucene_version=None, analysis=None)
    with LuceneIndex(index, AnalyzerConfig("kueristopv2")) as opened:
        assert len(opened) == 19 and "lucene_version" not in opened.manifest
