import os

import pytest

from kueri.errors import KueriError, SetupError
from kueri.lucene.analyze import (
    BASELINE_ANALYZER,
    MAIN_ANALYZER,
    AnalyzerConfig,
    analyze,
    build_analyzer,
    known_stoplists,
    read_stoplist,
    wordnet_synsets,
)


def tokens(config: AnalyzerConfig, text: str) -> list[str]:
    return analyze(build_analyzer(config), text)


def test_shipped_stoplists_have_the_original_sizes():
    sizes = {name: len(read_stoplist(name)) for name in ("lucene", "smart", "terrier", "kueristop", "kueristopv2")}
    # distinct words: lucene 33 lines (32 distinct after lower-casing... as Lucene's wordset reads)
    assert sizes == {"lucene": 33, "smart": 570, "terrier": 733, "kueristop": 400, "kueristopv2": 390}
    assert read_stoplist("kueristop") - read_stoplist("kueristopv2") == {
        "course", "family", "food", "major", "milk", "online", "real", "search", "water", "windows"}


def test_unknown_stoplist_lists_the_known_ones():
    with pytest.raises(KueriError, match="unknown stoplist 'nope'.*kueristopv2"):
        AnalyzerConfig(stoplist="nope")
    assert {"lucene", "smart", "terrier", "kueristop", "kueristopv2"} <= set(known_stoplists())


def test_stoplist_file_path(tmp_path):
    words = tmp_path / "mine.txt"
    words.write_text("# comment\nLaptop\n\n")
    assert tokens(AnalyzerConfig(stoplist=str(words)), "laptop desktop") == ["desktop"]


def test_original_chain_keeps_inner_punctuation():
    # standard tokenizer -> lower case -> stop: the original's only analyzer (verified cases)
    text = "Which is better, a Laptop or a desktop? Apple's u.s.a www.google.com 1,500 text:text:text 4:00"
    assert tokens(AnalyzerConfig("kueristopv2"), text) == [
        "laptop", "desktop", "apple's", "u.s.a", "www.google.com", "1,500", "text:text:text", "4", "00"]
    assert tokens(BASELINE_ANALYZER, "The laptop AND the desktop") == ["laptop", "desktop"]


def test_porter_after_the_stop_filter():
    config = AnalyzerConfig("lucene", stemmer="porter")
    expected = ["run", "runner", "laptop", "simpson", "poni"]
    assert tokens(config, "running runners laptops The Simpsons ponies") == expected
    # the stoplist sees unstemmed tokens: "this" is a stopword, "thi" (its stem) would not be
    assert tokens(config, "this") == []


def test_main_analyzer_possessive_and_repeated_characters():
    assert tokens(MAIN_ANALYZER, "John's Apple’s soooo zzz aaab 1000000 ab a") == [
        "john", "apple", "soo", "zz", "aab", "100", "ab"]


def test_letter_tokenizer_splits_on_every_non_letter():
    assert tokens(AnalyzerConfig("lucene", tokenizer="letter"), "text:text:text apple's 4:00 abc123def") == [
        "text", "text", "text", "apple", "s", "abc", "def"]


def test_bad_options():
    with pytest.raises(KueriError, match="stemmer"):
        AnalyzerConfig(stemmer="snowball")
    with pytest.raises(KueriError, match="tokenizer"):
        AnalyzerConfig(tokenizer="whitespace")


HAVE_WORDNET = os.path.isfile("/usr/share/wordnet/data.noun")


@pytest.mark.skipif(not HAVE_WORDNET and not os.environ.get("CI"),
                    reason="Debian's wordnet-base is not installed (make test installs it)")
def test_wordnet_synonyms(tmp_path, monkeypatch):
    monkeypatch.setenv("KUERI_CACHE", str(tmp_path))
    synsets = wordnet_synsets()
    assert len(synsets) > 40000 and ["laptop", "laptop computer"] in synsets
    config = AnalyzerConfig("lucene", synonyms="wordnet")
    query_side = analyze(build_analyzer(config, for_query=True), "car")
    assert {"car", "auto", "automobile", "motorcar"} <= set(query_side)
    assert (tmp_path / "wordnet-synonyms.solr.txt").is_file()  # converted once, then cached
    assert "automobile" in analyze(build_analyzer(config), "car")


def test_missing_wordnet_says_what_to_install(tmp_path):
    with pytest.raises(SetupError, match="apt-get install wordnet-base"):
        wordnet_synsets(tmp_path)
