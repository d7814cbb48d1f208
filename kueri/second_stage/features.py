"""Features of the second stage: what a comparative question's passage shows besides its BM25 score.

One module for training (``scripts/train_second_stage.py``) and prediction
(:func:`kueri.second_stage.ranking.second_stage`), so both always compute the same features.

Every feature comes from what an automatic run may use: the topic's title and its two objects, the
passage text (the index's stored ``contents``), the lexical run, and the index (two more BM25
queries). No description, narrative or judgment is read.

The groups (names in :data:`FEATURES`):

* **lexical**: the title run's BM25 score relative to the topic's best (log), its rank (log), and the
  BM25 scores, relative to the topic's best, of two queries built from the objects: the *objects-only*
  query (the two objects' words) and the *comparative* query (the objects' words plus comparative cue
  words, :data:`QUERY_CUES`). Both use the title query's analyzer and fields;
* **quality**: the offline argument-quality score (:mod:`kueri.quality.offline`), as a log, so that the
  original's multiplicative rerank (score x quality) is one of the linear combinations;
* **objects**: whether and how often each object is named, in how many sentences both are, how early
  the first mention comes, and how close the nearest mentions of the two objects are. Object matching
  is the stance stage's (:class:`kueri.objects.ObjectMatcher`: plurals, possessives, acronyms,
  short forms of multi-word objects);
* **comparative language**: comparative cue words (``better``, ``than``, ``vs``, ``advantages`` ...)
  anywhere, in sentences that name an object, in sentences that name both, and right next to an object
  mention (``OBJ1 is faster than OBJ2``, ``OBJ1 vs OBJ2``);
* **argumentative / stance-bearing text**: first-person opinion and recommendation cues, discourse
  markers of reasoning (``because``, ``however``), and the share of questions (a forum question asks,
  it does not argue);
* **shape**: length in tokens, the passage's number within its document (``___N``), and the share of
  the title's other content words that the passage contains;
* **neural** (only for models that use them; 0 for the others): the cosine similarity of title and passage
  embeddings of all-MiniLM-L6-v2 (:mod:`kueri.encoders.minilm`); the same model's *pseudo-relevance
  feedback* similarity, the cosine of the passage with the title moved towards the lexical run's top
  :data:`PRF_DEPTH` passages (the unit sum of the title's embedding and their mean: the passages that
  lexical retrieval is surest of tell what the topic's relevant passages look like); and the cosine of
  query and passage embeddings of multilingual-e5-small (:mod:`kueri.encoders.e5`), a second,
  differently trained encoder.

Counts enter as ``log1p`` so that one long list of mentions does not dominate a linear model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kueri import resources
from kueri.encoders.registry import E5, MINILM
from kueri.objects import OBJ1, OBJ2, MaskedPassage, ObjectMatcher, fold, mask_passage, tokens
from kueri.records import Hit, Topic

#: The values of :func:`text_features`, in order.
TEXT_FEATURES: tuple[str, ...] = (
    # objects
    "objects_named", "both_named", "mentions_log", "min_mentions_log", "both_sentences_log", "first_mention",
    # comparative language
    "comparative_log", "than_log", "object_comparative_sentences_log", "both_comparative_sentences_log",
    # argumentative / stance-bearing
    "opinion_log", "reasoning_log", "first_person_rate", "question_rate",
    # shape
    "tokens_log", "title_coverage",
    # how the objects meet: proximity and comparative patterns around a mention
    "object_proximity", "pattern_log",
)
#: The prefix of each encoder's neural columns (``PREFIX_title``, ``PREFIX_prf``, ``PREFIX_desc``, ``PREFIX_narr``:
#: those of :data:`NEURAL_FEATURES`), by the encoder's name in :mod:`kueri.encoders`' registry, in the order they
#: are computed.
NEURAL_COLUMNS: dict[str, str] = {MINILM.name: "dense", E5.name: "e5"}
#: The neural features (the last of a row) and the encoder each needs (its registry name); 0 where not computed.
NEURAL_FEATURES: dict[str, str] = {
    "dense_title": MINILM.name, "dense_prf": MINILM.name, "e5_title": E5.name,
    # the whole topic: the description's and the narrative's similarity with the passage
    "dense_desc": MINILM.name, "dense_narr": MINILM.name, "e5_desc": E5.name, "e5_narr": E5.name,
}
#: BM25 of the topic's description and narrative (parsed like the title), relative to the run's best.
TOPIC_FIELD_FEATURES: tuple[str, ...] = ("desc_bm25_rel", "narr_bm25_rel")
#: The fields of a topic the whole-topic features read, by feature.
TOPIC_FIELDS = {"desc": "description", "narr": "narrative"}
#: Feature names, in the order of a feature row (a model stores the names it weighs, to catch a mismatch).
FEATURES: tuple[str, ...] = (
    "log_bm25_rel", "log_rank", "objects_bm25_rel", "comparative_bm25_rel", "log_quality", *TEXT_FEATURES,
    "passage_number_log", *NEURAL_FEATURES, *TOPIC_FIELD_FEATURES,
)
#: The features that read only the title and the objects (the models before the whole-topic ones).
TITLE_FEATURES: tuple[str, ...] = FEATURES[: FEATURES.index("e5_title") + 1]
#: The lexical run's top passages whose embeddings the pseudo-relevance feedback feature averages.
PRF_DEPTH = 5
#: Added before taking logarithms of scores in [0, 1] (BM25 relative to the topic's best, quality): the log
#: makes a product of scores (the original's score x quality) a sum, which a linear model can express.
LOG_FLOOR = 1e-3

# Comparative language: the words people use when they weigh one thing against another. Lower case,
# matched on whole tokens (after the stance matcher lower-cases every token but OBJ1 / OBJ2).
COMPARATIVE_CUES = frozenset({
    "better", "worse", "best", "worst", "than", "vs", "versus", "compare", "compared", "compares", "comparing",
    "comparison", "comparisons", "comparable", "difference", "differences", "different", "differ", "differs",
    "advantage", "advantages", "disadvantage", "disadvantages", "pros", "cons", "benefit", "benefits",
    "drawback", "drawbacks", "downside", "downsides", "upside", "superior", "inferior", "prefer", "prefers",
    "preferred", "preferable", "preference", "faster", "slower", "cheaper", "easier", "harder", "safer",
    "healthier", "stronger", "weaker", "bigger", "smaller", "larger", "higher", "lower", "more", "less",
    "whereas", "unlike", "similar", "similarities", "alternative", "outperform", "outperforms", "beats",
    "winner", "choose", "choice", "rather", "instead", "expensive", "efficient",
})
# First-person opinion, recommendation and evaluation: text that takes a side.
OPINION_CUES = frozenset({
    "i", "i'm", "i've", "i'd", "my", "me", "think", "believe", "feel", "opinion", "personally", "recommend",
    "recommended", "suggest", "should", "would", "prefer", "love", "hate", "favorite", "favourite", "honestly",
    "imo", "imho", "experience", "agree", "disagree", "definitely", "worth", "go", "pick", "buy",
})
# Discourse markers of reasoning: claims with reasons are what argument retrieval looks for.
REASONING_CUES = frozenset({
    "because", "since", "therefore", "thus", "hence", "however", "although", "though", "but", "so",
    "consequently", "reason", "reasons", "evidence", "example", "instance", "means", "if", "unless", "while",
})
# Words that, next to an object mention, make a comparison of it ("OBJ1 is faster than OBJ2", "OBJ1 vs OBJ2").
PATTERN_CUES = frozenset({"than", "vs", "versus", "over", "compared", "unlike", "whereas", "against"})
#: Words added to the objects in the comparative query (BM25 weighs them by rarity, unlike the cue counts).
QUERY_CUES = ("better", "worse", "than", "vs", "versus", "compared", "comparison", "difference", "advantages",
              "disadvantages", "pros", "cons", "prefer")
FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "my", "me", "we", "our"})
# Title words that say "this is a comparison" rather than what it is about (kept out of title_coverage).
_TITLE_FUNCTION_WORDS = resources.word_list("title-function-words")
_PASSAGE_NUMBER = re.compile(r"___(\d+)$")
_OBJECTS = (OBJ1, OBJ2)


@dataclass(frozen=True)
class TopicTerms:
    """What a topic contributes to the text features, built once per topic."""

    matcher: ObjectMatcher
    title_words: frozenset[str]  # folded content words of the title that are not object words

    @classmethod
    def of(cls, topic: Topic) -> TopicTerms:
        object_words = {fold(w) for obj in topic.objects for w in tokens(obj)}
        title = {fold(w) for w in tokens(topic.title) if w.lower() not in _TITLE_FUNCTION_WORDS}
        return cls(ObjectMatcher(*topic.objects), frozenset(title - object_words))


def _count(values: Iterable[str], vocabulary: frozenset[str]) -> int:
    return sum(1 for v in values if v in vocabulary)


def _min_distance(first: Sequence[int], second: Sequence[int]) -> int | None:
    """The smallest |a - b| over two ascending position lists (a linear merge), None if one is empty."""
    if not first or not second:
        return None
    best, i, j = abs(first[0] - second[0]), 0, 0
    while i < len(first) and j < len(second):
        best = min(best, abs(first[i] - second[j]))
        if first[i] < second[j]:
            i += 1
        else:
            j += 1
    return best


def text_features(text: str, terms: TopicTerms) -> list[float]:
    """The text features of one passage for one topic: :data:`TEXT_FEATURES`, in that order."""
    masked: MaskedPassage = mask_passage(text, terms.matcher)
    flat = masked.tokens
    n = len(flat)
    n1, n2 = flat.count(OBJ1), flat.count(OBJ2)
    first = next((i for i, t in enumerate(flat) if t in _OBJECTS), None)
    both_sentences = comparative_object = comparative_both = 0
    for sentence in masked.sentences:
        has1, has2 = OBJ1 in sentence, OBJ2 in sentence
        cue = not COMPARATIVE_CUES.isdisjoint(sentence)
        both_sentences += has1 and has2
        comparative_object += cue and (has1 or has2)
        comparative_both += cue and has1 and has2
    # The token pattern drops punctuation: count the question marks of the raw text instead.
    questions = min(text.count("?") / max(len(masked.sentences), 1), 1.0)
    positions1 = [i for i, t in enumerate(flat) if t == OBJ1]
    positions2 = [i for i, t in enumerate(flat) if t == OBJ2]
    distance = _min_distance(positions1, positions2)
    near = {j for i in positions1 + positions2 for j in range(max(i - 2, 0), min(i + 3, n))}
    patterns = sum(1 for j in near if flat[j] in PATTERN_CUES)
    folded = {fold(t) for t in flat if t not in _OBJECTS}
    coverage = len(terms.title_words & folded) / len(terms.title_words) if terms.title_words else 1.0
    return [
        ((n1 > 0) + (n2 > 0)) / 2.0,
        float(n1 > 0 and n2 > 0),
        math.log1p(n1 + n2),
        math.log1p(min(n1, n2)),
        math.log1p(both_sentences),
        first / n if first is not None and n else 1.0,  # how early an object is first named (1: never)
        math.log1p(_count(flat, COMPARATIVE_CUES)),
        math.log1p(flat.count("than")),
        math.log1p(comparative_object),
        math.log1p(comparative_both),
        math.log1p(_count(flat, OPINION_CUES)),
        math.log1p(_count(flat, REASONING_CUES)),
        _count(flat, FIRST_PERSON) / max(n, 1),
        questions,
        math.log1p(n),
        coverage,
        1.0 / distance if distance else 0.0,  # 1: adjacent ("OBJ1 OBJ2"), 0: not both named
        math.log1p(patterns),
    ]


def passage_number(pid: str) -> int:
    """The passage's number within its ClueWeb12 document (``...___3`` -> 3; 1 when there is none)."""
    match = _PASSAGE_NUMBER.search(pid)
    return int(match.group(1)) if match else 1


def relative(values: Sequence[float]) -> list[float]:
    """Values divided by the topic's largest (all 0 when none is positive): comparable across topics."""
    top = max(values, default=0.0)
    return [v / top if top > 0 else 0.0 for v in values]


def topic_features(
    topic: Topic,
    hits: Sequence[Hit],
    texts: Sequence[str],
    quality: Sequence[float],
    objects_rel: Sequence[float],
    comparative_rel: Sequence[float],
    neural: Mapping[str, Sequence[float]] | None = None,
    fields_rel: Mapping[str, Sequence[float]] | None = None,
) -> np.ndarray:
    """The feature matrix (``len(hits)`` x ``len(FEATURES)``) of one topic's hits, in the lexical run's order.

    ``hits`` are the top of the topic's lexical run (rank 1 first). ``texts``, ``quality``, ``objects_rel`` and
    ``comparative_rel`` are aligned with them: the passage contents, the offline quality, and the BM25
    scores (0 where they do not match) of the objects-only query and of the comparative query (objects +
    :data:`QUERY_CUES`) relative to their best over the *whole* lexical run, so that a feature does not
    depend on the depth. ``neural``: the columns of :data:`NEURAL_FEATURES` that were computed, by name
    (a missing one is 0); ``fields_rel``: those of :data:`TOPIC_FIELD_FEATURES`, likewise.
    """
    terms = TopicTerms.of(topic)
    bm25 = relative([h.score for h in hits])  # rank 1 holds the run's best: the same at any depth
    neural = neural or {}
    unknown = set(neural) - set(NEURAL_FEATURES)
    if unknown:
        raise ValueError(f"unknown neural features {sorted(unknown)}")
    zeros = [0.0] * len(hits)
    columns = [neural.get(name, zeros) for name in NEURAL_FEATURES]
    columns += [(fields_rel or {}).get(name, zeros) for name in TOPIC_FIELD_FEATURES]
    matrix = np.empty((len(hits), len(FEATURES)), dtype=np.float64)
    for i, (hit, text) in enumerate(zip(hits, texts, strict=True)):
        matrix[i] = [math.log(bm25[i] + LOG_FLOOR), math.log(i + 1), objects_rel[i], comparative_rel[i],
                     math.log(quality[i] + LOG_FLOOR),
                     *text_features(text or "", terms),
                     math.log(passage_number(hit.doc)), *(float(column[i]) for column in columns)]
    return matrix
