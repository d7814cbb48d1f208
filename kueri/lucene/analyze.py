"""analyze: stoplists and Lucene analyzers built from an :class:`AnalyzerConfig`.

Every original run used one chain: standard tokenizer -> lower case -> stop filter (ignore case,
Lucene wordset format). The options add what the paper used outside the code (Porter stemming
right after the stop filter; a letter tokenizer for the RF indexes) and the original's unused
``BaselineAnalyzer`` / ``MainAnalyzer`` (English possessive, the repeated-character filter,
WordNet synonyms). pyjnius cannot subclass ``Analyzer``, so chains are composed from Lucene's
factories with ``CustomAnalyzer.builder()``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri import resources
from kueri.errors import KueriError, SetupError
from kueri.lucene.jvm import java_error_message, lucene

STOPLIST_DIR = resources.stoplists()

#: The original's MultipleCharsFilter: every run of 3+ identical characters shrinks to 2
#: (``soooo`` -> ``soo``, ``1000000`` -> ``100``); a regex does the same on a token.
REPEATED_CHARS_PATTERN = r"(.)\1{2,}"
REPEATED_CHARS_REPLACEMENT = "$1$1"

WORDNET_DIR = Path(os.environ.get("KUERI_WORDNET_DIR", "/usr/share/wordnet"))
WORDNET_INSTALL_HINT = "install Debian's WordNet database: apt-get install wordnet-base"


def known_stoplists() -> list[str]:
    return sorted(p.stem for p in STOPLIST_DIR.glob("*.txt"))


def stoplist_path(name_or_path: str) -> Path:
    """A shipped stoplist by name (``kueristopv2``) or any word-per-line file by path."""
    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate.resolve()
    shipped = STOPLIST_DIR / f"{name_or_path.removesuffix('.txt')}.txt"
    if shipped.is_file():
        return shipped
    raise KueriError(
        f"unknown stoplist {name_or_path!r}: not a file, and not one of {', '.join(known_stoplists())}"
    )


def stoplist_name(name_or_path: str) -> str:
    """The name used in run tags: the file name up to its first dot (as the original)."""
    return Path(name_or_path).name.split(".")[0]


def read_stoplist(name_or_path: str) -> set[str]:
    """The words of a stoplist as Lucene's wordset format reads them (trimmed, no #, lower case)."""
    return set(resources.read_words(stoplist_path(name_or_path)))


@dataclass(frozen=True)
class AnalyzerConfig:
    """One analysis chain; the same config must be used for indexing and searching."""

    stoplist: str = "lucene"  # a shipped name or a path; "none" for no stop filter
    tokenizer: str = "standard"  # "standard" (UAX#29) or "letter" (the paper's RF indexes)
    stemmer: str | None = None  # None or "porter" (after the stop filter, as in the paper)
    possessive: bool = False  # English possessive filter (MainAnalyzer)
    repeated_chars: bool = False  # runs of 3+ identical characters -> 2 (MainAnalyzer)
    synonyms: str | None = None  # None or "wordnet" (an extension: no paper run used it)

    def __post_init__(self) -> None:
        if self.tokenizer not in ("standard", "letter"):
            raise KueriError(f"unknown tokenizer {self.tokenizer!r}: use standard or letter")
        if self.stemmer not in (None, "porter"):
            raise KueriError(f"unknown stemmer {self.stemmer!r}: use porter or none")
        if self.synonyms not in (None, "wordnet"):
            raise KueriError(f"unknown synonyms {self.synonyms!r}: use wordnet or none")
        if self.stoplist != "none":
            stoplist_path(self.stoplist)  # fail early, with the list of known names

    def summary(self) -> str:
        """The chain in words, for the line that says what a build or a run uses."""
        steps = [f"{self.tokenizer} tokenizer", "lower case"]
        if self.possessive:
            steps.append("English possessive")
        if self.repeated_chars:
            steps.append("repeated characters")
        steps.append("no stop filter" if self.stoplist == "none" else f"stoplist {stoplist_name(self.stoplist)}")
        if self.synonyms:
            steps.append(f"{self.synonyms} synonyms")
        steps.append(f"{self.stemmer} stemmer" if self.stemmer else "no stemmer")
        return ", ".join(steps)

    def describe(self) -> dict[str, Any]:
        """JSON-able description (index manifests compare it to reuse indexes)."""
        stop = "none" if self.stoplist == "none" else str(stoplist_path(self.stoplist))
        return {
            "stoplist": stop,
            "stoplist_words": 0 if stop == "none" else len(read_stoplist(self.stoplist)),
            "tokenizer": self.tokenizer,
            "stemmer": self.stemmer,
            "possessive": self.possessive,
            "repeated_chars": self.repeated_chars,
            "synonyms": self.synonyms,
        }

    def fingerprint(self) -> str:
        """What the chain does to text, as a short hash: the options and the stoplist's words, not where
        the stoplist lies (a checkout and an installed package give the same). An index manifest records
        it; an index whose analysis now hashes otherwise (its stoplist's words changed) no longer matches
        the queries analysed for it."""
        options = {k: v for k, v in self.describe().items() if k not in ("stoplist", "stoplist_words")}
        words = [] if self.stoplist == "none" else sorted(read_stoplist(self.stoplist))
        payload = json.dumps({**options, "stop": self.stoplist != "none", "stoplist_words": words}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


#: The original's two analyzer classes, as configurations.
BASELINE_ANALYZER = AnalyzerConfig(stoplist="lucene")
MAIN_ANALYZER = AnalyzerConfig(stoplist="lucene", possessive=True, repeated_chars=True)


def _params(**values: str) -> Any:
    params = lucene().HashMap()
    for key, value in values.items():
        params.put(key, value)
    return params


def build_analyzer(config: AnalyzerConfig, for_query: bool = False) -> Any:
    """A Lucene ``CustomAnalyzer`` for ``config``.

    ``for_query`` only matters with synonyms: the index side flattens the synonym graph (Lucene
    cannot index graphs), the query side keeps it so the query parser sees multi-word synonyms.
    """
    L = lucene()
    try:
        builder = L.CustomAnalyzer.builder(L.File(str(STOPLIST_DIR)).toPath())
        builder = builder.withTokenizer(config.tokenizer, _params())
        builder = builder.addTokenFilter("lowercase", _params())
        if config.possessive:
            builder = builder.addTokenFilter("englishPossessive", _params())
        if config.repeated_chars:
            builder = builder.addTokenFilter(
                "patternReplace",
                _params(
                    pattern=REPEATED_CHARS_PATTERN,
                    replacement=REPEATED_CHARS_REPLACEMENT,
                    replace="all",
                ),
            )
        if config.stoplist != "none":
            builder = builder.addTokenFilter(
                "stop",
                _params(words=str(stoplist_path(config.stoplist)), ignoreCase="true", format="wordset"),
            )
        if config.synonyms == "wordnet":
            builder = builder.addTokenFilter(
                "synonymGraph",
                _params(synonyms=str(wordnet_synonyms_file()), format="solr", ignoreCase="true", expand="true"),
            )
        if config.stemmer == "porter":
            builder = builder.addTokenFilter("porterStem", _params())
        if config.synonyms and not for_query:
            builder = builder.addTokenFilter("flattenGraph", _params())
        return builder.build()
    except L.JavaException as exc:
        raise KueriError(f"cannot build the analyzer {config}: {java_error_message(exc)}") from exc


@functools.cache
def cached_analyzer(config: AnalyzerConfig, for_query: bool = False) -> Any:
    """One analyzer per configuration and side, built on first use (analyzers are thread-safe and reusable)."""
    return build_analyzer(config, for_query)


def tokenize(config: AnalyzerConfig, text: str, for_query: bool = False) -> list[str]:
    """The terms ``config``'s chain makes of ``text``: what the index holds, or a query asks for."""
    return analyze(cached_analyzer(config, for_query), text)


def analyze(analyzer: Any, text: str, field: str = "contents") -> list[str]:
    """The tokens ``analyzer`` makes of ``text`` (for tests, debugging and derived stoplists)."""
    L = lucene()
    stream = analyzer.tokenStream(field, text)
    term = L.cast(L.CharTermAttribute, stream.addAttribute(L.CharTermAttribute._class))
    tokens = []
    try:
        stream.reset()
        while stream.incrementToken():
            tokens.append(term.toString())
        stream.end()
    finally:
        stream.close()
    return tokens


# --- WordNet synonyms -------------------------------------------------------------------------

WORDNET_DATA_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")  # syntactic markers of adjectives: galore(ip)


def wordnet_synsets(wordnet_dir: Path = WORDNET_DIR) -> list[list[str]]:
    """The synsets of the WordNet 3.0 database files as lists of lower-case lemmas.

    Reads the ``data.*`` files directly (format: WordNet's wndb(5)): ``offset lex_filenum ss_type
    w_cnt(hex) word lex_id [word lex_id ...] ...``. nltk's reader was the plan, but it needs a
    ``lexnames`` file Debian does not ship and a copied ``corpora/wordnet`` folder; this is the
    part of the format we need.
    """
    missing = [name for name in WORDNET_DATA_FILES if not (wordnet_dir / name).is_file()]
    if missing:
        raise SetupError(
            f"WordNet synonyms need the WordNet database files in {wordnet_dir} "
            f"(missing {', '.join(missing)}); {WORDNET_INSTALL_HINT} or set KUERI_WORDNET_DIR"
        )
    synsets = []
    for name in WORDNET_DATA_FILES:
        with open(wordnet_dir / name, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("  "):  # licence header lines start with two spaces
                    continue
                fields = line.split(" ")
                count = int(fields[3], 16)
                lemmas = []
                for i in range(count):
                    lemma = _ADJ_MARKER.sub("", fields[4 + 2 * i]).replace("_", " ").lower()
                    if lemma not in lemmas:
                        lemmas.append(lemma)
                if len(lemmas) > 1:
                    synsets.append(lemmas)
    return synsets


def _cache_dir() -> Path:
    base = os.environ.get("KUERI_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kueri"
    )
    return Path(base)


def wordnet_synonyms_file(wordnet_dir: Path = WORDNET_DIR) -> Path:
    """WordNet converted once into Lucene's ``solr`` synonym format, cached under KUERI_CACHE."""
    target = _cache_dir() / "wordnet-synonyms.solr.txt"
    if target.is_file():
        return target
    synsets = wordnet_synsets(wordnet_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with open(partial, "w", encoding="utf-8") as out:
        for lemmas in synsets:
            # solr format: "a, b, c" = equivalent terms; commas and backslashes would need escapes
            out.write(", ".join(lemma.replace("\\", "\\\\").replace(",", "\\,") for lemma in lemmas))
            out.write("\n")
    os.replace(partial, target)
    return target
