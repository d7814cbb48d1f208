"""kueri's stages as PyTerrier transformers: compose with ``>>``, cut with ``%``, compare in ``pt.Experiment``.

    import pyterrier as pt
    from kueri import pyterrier as kp

    topics, qrels = kp.topics(SAMPLE / "topics.xml"), kp.qrels(QRELS)
    index = kp.index(SAMPLE / "passages.jsonl.gz")
    row15 = kp.Retriever(index, config="row-15")
    pt.Experiment([row15, kp.pipeline("default", SAMPLE / "passages.jsonl.gz")], topics, qrels, ["ndcg_cut_5"])

Frames follow PyTerrier's conventions: topics have ``qid`` and ``query`` (kueri's also ``first``, ``second``,
``description``, ``narrative``), results add ``docno``, ``score`` and ``rank`` (from 0), in kueri's order
(its ties included); columns a transformer does not know are passed through. A stage that needs the
topics' objects (the second stage, stance, the objects filter) says so when ``first``/``second`` are
missing. ``pipeline(name, ...)`` is the transformer form of ``kueri run --config NAME``; written with
:func:`write_run` it gives the CLI's run file line for line.

PyTerrier's own Java (``pt.java.init()``, which downloads Terrier's jars) is never needed. kueri starts its
JVM on first use; if PyTerrier's was started first, kueri's Lucene is not on its class path and kueri
says what to do (see :func:`kueri.lucene.jvm.find_jar`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri.config import RunConfig, get_config
from kueri.errors import KueriError, SetupError
from kueri.files import writable_folder
from kueri.fusion import DEFAULT_K, ranked, reciprocal_rank_fusion
from kueri.lucene import AnalyzerConfig, LuceneIndex
from kueri.parse import TextCorpus, read_topics
from kueri.pipeline import default_workdir
from kueri.questions import extract_objects
from kueri.records import NO_STANCE, Hit, Run, Topic
from kueri.runcontext import RunContext
from kueri.runfile import read_qrels
from kueri.runfile import write_run as write_run_file
from kueri.session import Session
from kueri.stages import Stage, kind_named

try:
    import pandas as pd
    import pyterrier as pt
except ImportError as exc:  # pragma: no cover - the optional extra is missing
    raise SetupError(f"kueri.pyterrier needs PyTerrier ({exc}): pip install 'kueri[pyterrier]'") from None

TOPIC_COLUMNS = ["qid", "query", "first", "second", "description", "narrative"]
RESULT_COLUMNS = ["docno", "score", "rank"]


# -- data ---------------------------------------------------------------------------------------------------


def topics(path: str | Path) -> pd.DataFrame:
    """A Touché topics file as a PyTerrier topics frame: ``qid`` (str), ``query`` (the title), ``first``,
    ``second`` (the two objects), ``description``, ``narrative``."""
    return pd.DataFrame([(t.number, t.title, t.objects[0], t.objects[1], t.description, t.narrative)
                         for t in read_topics(path)], columns=TOPIC_COLUMNS)


def qrels(path: str | Path) -> pd.DataFrame:
    """A qrels file as a PyTerrier qrels frame: ``qid``, ``docno``, ``label`` (int)."""
    return pd.DataFrame([(qid, doc, int(grade)) for qid, docs in read_qrels(path).items()
                         for doc, grade in docs.items()], columns=["qid", "docno", "label"])


@dataclass
class Index:
    """A corpus's :class:`~kueri.session.Session` (its work folder, bad lines; no progress bars) and the analysis of
    this handle: the index of any analysis, built or reused exactly as the CLI does, and what kueri's stages load,
    shared by every transformer made of it."""

    session: Session
    analyzer: AnalyzerConfig

    @property
    def corpus(self) -> Path:
        return Path(self.session.corpus)  # type: ignore[arg-type]

    @property
    def run_context(self) -> RunContext:
        return self.session.run_context

    def lucene(self, analyzer: AnalyzerConfig | None = None) -> LuceneIndex:
        """The open Lucene index of ``analyzer`` (this handle's by default)."""
        return self.session.index(analyzer or self.analyzer)

    def with_analyzer(self, analyzer: AnalyzerConfig) -> Index:
        """The same corpus and session under another analysis."""
        return Index(self.session, analyzer)

    def context(self, topics: list[Topic]) -> Any:
        """The context kueri's stages run in over ``topics`` (:meth:`~kueri.session.Session.context`)."""
        self.lucene()  # its own index first: stages that take any index's texts take this one
        return self.session.context(topics)


def index(corpus: str | Path, config: str = "default", workdir: str | Path | None = None,
          skip_bad: bool = False) -> Index:
    """The index of ``corpus`` for configuration ``config``'s analysis, in ``workdir`` (as ``kueri run``)."""
    session = Session(Path(corpus), RunContext(Path(workdir) if workdir else None, progress=False, skip_bad=skip_bad))
    handle = Index(session, get_config(config).analyzer)
    handle.lucene()  # build (or reuse) it now, as the CLI does
    return handle


# -- frames and runs ----------------------------------------------------------------------------------------


def _require(frame: pd.DataFrame, columns: Sequence[str], who: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        hint = " (kueri.pyterrier.topics() gives them)" if {"first", "second"} & set(missing) else ""
        raise KueriError(f"{who} needs the column(s) {', '.join(missing)}{hint}; it got {list(frame.columns)}")


def topic_records(frame: pd.DataFrame, who: str, objects: bool = False, extract: bool = False) -> list[Topic]:
    """The topics of a frame (one per qid, first row wins). The objects are ``first``/``second``, else an
    ``objects`` pair (as ``pt.get_dataset('irds:clueweb12/touche-2022-task-2').get_topics(tokenise_query=False)``
    gives them, with the question in ``title``), else, with ``extract``, the question's
    (:func:`kueri.questions.extract_objects`); ``objects``: they are required."""
    if "query" not in frame.columns and "title" in frame.columns:  # pt's irds topics without a variant
        frame = frame.rename(columns={"title": "query"})
    pair = "first" not in frame.columns and "second" not in frame.columns and "objects" in frame.columns
    _require(frame, ["qid", "query", *(["first", "second"] if objects and not pair and not extract else [])], who)
    rows = frame.drop_duplicates("qid")

    def text(row: Any, name: str) -> str:
        return str(row[name]) if name in rows.columns and pd.notna(row[name]) else ""

    def objects_of(row: Any) -> tuple[str, str]:
        if pair and isinstance(row["objects"], list | tuple) and len(row["objects"]) == 2:
            return str(row["objects"][0]).strip(), str(row["objects"][1]).strip()
        if "first" in rows.columns or not extract:
            return text(row, "first"), text(row, "second")
        found = extract_objects(str(row["query"]))
        return (found.first, found.second) if found is not None else ("", "")

    return [Topic(str(row["qid"]), str(row["query"]), objects_of(row), text(row, "description"),
                  text(row, "narrative")) for _, row in rows.iterrows()]


def run_of(results: pd.DataFrame) -> Run:
    """A results frame as a kueri run: topics in the frame's order, hits by ``rank`` (else by score)."""
    _require(results, ["qid", "docno", "score"], "a kueri stage")
    order = {qid: i for i, qid in enumerate(dict.fromkeys(results["qid"].astype(str)))}
    frame = results.assign(_topic=results["qid"].astype(str).map(order))
    if "rank" in frame.columns:
        frame = frame.sort_values(["_topic", "rank"], kind="stable")
    else:
        frame = frame.sort_values(["_topic", "score"], ascending=[True, False], kind="stable")
    stances = frame["stance"] if "stance" in frame.columns else [NO_STANCE] * len(frame)
    run: Run = {}
    for qid, doc, score, stance in zip(frame["qid"].astype(str), frame["docno"], frame["score"], stances,
                                       strict=True):
        run.setdefault(qid, []).append(Hit(str(doc), float(score), str(stance)))
    return run


def frame_of(run: Run, given: pd.DataFrame, stance: bool = False) -> pd.DataFrame:
    """A kueri run as a results frame, with the columns of ``given`` passed through: its query columns for
    every hit, its per-document columns for the hits it had. Ranks from 0 in kueri's order."""
    rows = [(qid, hit.doc, hit.score, rank, hit.stance) for qid, hits in run.items()
            for rank, hit in enumerate(hits)]
    frame = pd.DataFrame(rows, columns=["qid", "docno", "score", "rank", "stance"])
    if not stance:
        frame = frame.drop(columns="stance")
    given = given.assign(qid=given["qid"].astype(str))
    if "docno" in given.columns:  # a results frame: keep its other columns per (qid, docno)
        extra = given.drop(columns=[c for c in ("score", "rank", "stance") if c in given.columns])
        return frame.merge(extra.drop_duplicates(["qid", "docno"]), on=["qid", "docno"], how="left")
    queries = given.drop_duplicates("qid")
    out = frame.merge(queries, on="qid", how="left")
    return out[[*queries.columns, *[c for c in frame.columns if c != "qid"]]]


def write_run(results: pd.DataFrame, path: str | Path, tag: str) -> int:
    """``results`` as a Touché run file (stance column, else ``Q0``), atomically; the number of lines."""
    return write_run_file(run_of(results), path, tag)


# -- transformers -------------------------------------------------------------------------------------------


def _outputs(input_columns: list[str], added: Sequence[str]) -> list[str]:
    """What a transformer returns for ``input_columns``: them, then the columns it adds."""
    return [*input_columns, *(c for c in added if c not in input_columns)]


class StageTransformer(pt.Transformer):
    """Any kueri stage (:mod:`kueri.stages`) over a results frame; inspectable by PyTerrier without running it."""

    def __init__(self, stage: Stage, index: Index) -> None:
        self.stage, self.index = stage, index

    @property
    def who(self) -> str:
        return type(self).__name__ if type(self) is not StageTransformer else f"kueri stage {self.stage.name}"

    @property
    def transform_inputs(self) -> list[list[str]]:
        objects = ["first", "second"] if self.stage.needs_objects else []
        return [["qid", "query", *objects, "docno", "score", "rank"]]

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        return _outputs(input_columns, self.stage.adds)

    def transform(self, results: pd.DataFrame) -> pd.DataFrame:
        records = topic_records(results, self.who, objects=self.stage.needs_objects)
        run = self.stage.apply(run_of(results), self.index.context(records))
        return frame_of(run, results, stance="stance" in self.stage.adds or "stance" in results.columns)

    def __repr__(self) -> str:
        return f"kueri.StageTransformer({self.stage!r})"


class FirstStage(StageTransformer):
    """Topics -> results: a configuration's first stage (its search, feedback or fusion)."""

    who = property(lambda self: f"Retriever({self.stage.name})")

    @property
    def transform_inputs(self) -> list[list[str]]:
        return [["qid", "query", *(["first", "second"] if self.stage.needs_objects else [])]]

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        return _outputs(input_columns, RESULT_COLUMNS)

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        records = topic_records(topics, self.who, self.stage.needs_objects)
        run = self.stage.apply({}, self.index.context(records))
        return frame_of(run, topics.drop(columns=[c for c in ("docno", "score", "rank") if c in topics.columns]))


class Retriever(FirstStage):
    """Topics -> results of one search, feedback or fusion configuration (``row-15``: kueristopv2 + Porter, BM25).

    Its index is the handle's corpus and work folder under the configuration's analysis; ``hits`` per topic.
    """

    def __init__(self, index: Index, config: str | RunConfig = "row-15", hits: int = 1000) -> None:
        self.config = (get_config(config) if isinstance(config, str) else config).with_changes(hits=hits)
        first, *later = self.config.stages()
        if later:
            raise KueriError(f"Retriever runs a search, feedback or fusion configuration; {self.config.name} has more "
                             f"stages: use kueri.pyterrier.pipeline({self.config.name!r}, corpus)")
        super().__init__(first, index.with_analyzer(self.config.analyzer))

    who = property(lambda self: f"Retriever({self.config.name})")

    def __repr__(self) -> str:
        return f"kueri.Retriever({self.config.name!r}, hits={self.config.hits})"


class SettingsTransformer(StageTransformer):
    """A transformer of one registered stage (``kind``), its parameters that stage's settings which declare a
    ``param`` (:class:`kueri.stages.Option`): the stage is what a configuration with those settings asks for."""

    kind = ""

    def __init__(self, index: Index, *args: Any, **given: Any) -> None:
        params = _params(self.kind)
        if len(args) > len(params):
            raise TypeError(f"{type(self).__name__} takes at most {len(params)} settings besides the index")
        unknown = set(given) - set(params)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no parameter {', '.join(sorted(unknown))}; it has "
                            f"{', '.join(params)}")
        given.update(zip(params, args, strict=False))
        self.settings = {param: given.get(param, _default(option)) for param, option in params.items()}
        changes = {params[param].name: _setting(value) for param, value in self.settings.items()}
        stage = kind_named(self.kind).build(RunConfig(name=self.kind, analyzer=index.analyzer).with_changes(**changes))
        if stage is None:
            raise KueriError(f"{type(self).__name__}: these settings switch the stage off ({self.settings})")
        super().__init__(stage, index)

    def __repr__(self) -> str:
        shown = ", ".join(f"{param}={list(value) if isinstance(value, tuple) else value!r}"
                          for param, value in self.settings.items())
        return f"kueri.{type(self).__name__}({shown})"


def _params(kind: str) -> dict[str, Any]:
    return {option.param: option for option in kind_named(kind).options if option.param}


def _default(option: Any) -> Any:
    return option.on if option.on is not None else option.default


def _setting(value: Any) -> Any:
    return tuple(tuple(step) for step in value) if isinstance(value, list) else value


def _transformer(name: str, kind: str, doc: str) -> type[SettingsTransformer]:
    """The transformer class of the stage ``kind``; its signature lists the stage's parameters with their defaults."""
    cls = type(name, (SettingsTransformer,), {"kind": kind, "__doc__": doc, "__module__": __name__})
    parameters = [inspect.Parameter("index", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Index)]
    parameters += [inspect.Parameter(param, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=_default(option))
                   for param, option in _params(kind).items()]
    cls.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return cls


SecondStage = _transformer("SecondStage", "second-stage", """The learned second stage: reranks the top ``depth`` hits
    of each topic (title, objects, quality, neural); ``depth`` None: the depth the model was trained at. ``cascade``:
    cheaper models first, each with how many of its top hits the next reorders, e.g. the default's
    ``get_config("default").second_stage_cascade``.""")
QualityRerank = _transformer("QualityRerank", "quality", """Scores times argument quality: ``offline`` (the shipped
    model), ``debater-2022`` (the original team's IBM Debater scores), or a score file.""")
Stance = _transformer("Stance", "stance", """Adds a ``stance`` column: FIRST / SECOND / NEUTRAL / NO for the top
    ``depth`` hits (None: every hit) by ``model``, else Q0.""")


def _labels_stance(config: RunConfig) -> bool:
    return any("stance" in stage.adds for stage in config.stages())


class Rerank(pt.Transformer):
    """Any first stage's results -> the configuration's later stages over exactly those candidates (second stage,
    quality, stance), as ``kueri rerank``: a results frame with ``qid``, ``query``, ``docno``, ``score``, ``rank``,
    and the passages' ``text`` (as TIRA's ``load_rerank_data`` gives them) unless ``corpus`` is given. The objects
    are ``first``/``second`` or ``objects``, else the question's. With ``corpus``, the second stage's BM25 features
    use its index; without, the candidates' own statistics."""

    def __init__(self, config: str = "default", corpus: str | Path | None = None,
                 workdir: str | Path | None = None) -> None:
        self.config = get_config(config)
        self.corpus = Path(corpus) if corpus is not None else None
        self.run_context = RunContext(writable_folder(workdir or default_workdir(), "work folder"), progress=False)
        self._session = Session(self.corpus, self.run_context) if self.corpus is not None else None

    @property
    def workdir(self) -> Path:
        return self.run_context.workdir  # type: ignore[return-value]

    @property
    def transform_inputs(self) -> list[list[str]]:
        return [["qid", "query", "docno", "score", "rank", *([] if self.corpus else ["text"])]]

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        return _outputs(input_columns, ["stance"] if _labels_stance(self.config) else [])

    def transform(self, results: pd.DataFrame) -> pd.DataFrame:
        who = f"Rerank({self.config.name})"
        _require(results, ["qid", "query", "docno", "score", *([] if self.corpus else ["text"])], who)
        records = topic_records(results, who, extract=True)
        if self._session is not None:  # the transformer's one session over its corpus
            run = self._session.run_given(self.config, run_of(results), records, source=who)
        else:  # the frame's candidates are a corpus of their own
            texts = dict(zip(results["docno"].astype(str), results["text"].astype(str), strict=True))
            with Session(TextCorpus(texts, f"the candidates given to {who}"), self.run_context) as session:
                run = session.run_given(self.config, run_of(results), records, source=who)
        return frame_of(run, results, stance=_labels_stance(self.config) or "stance" in results.columns)

    def __repr__(self) -> str:
        return f"kueri.Rerank({self.config.name!r}, corpus={str(self.corpus) if self.corpus else None!r})"


class RRF(pt.Transformer):
    """Reciprocal rank fusion of the transformers' results, as the original (rank column, ``k``, top ``depth``,
    ties in Java's order; ``tie_order="first-seen"`` needs no JVM)."""

    def __init__(self, *transformers: pt.Transformer, k: float = DEFAULT_K, depth: int = 1000,
                 tie_order: str = "java") -> None:
        if not transformers:
            raise KueriError("RRF needs at least one transformer")
        self.transformers, self.k, self.depth, self.tie_order = list(transformers), k, depth, tie_order

    @property
    def transform_inputs(self) -> list[list[str]]:
        return [["qid", "query"]]

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        return _outputs(input_columns, RESULT_COLUMNS)

    def subtransformers(self) -> dict[str, Any]:
        return {"transformers": self.transformers}

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        runs = [ranked(run_of(t.transform(topics))) for t in self.transformers]
        fused = reciprocal_rank_fusion(runs, k=self.k, depth=self.depth, tie_order=self.tie_order)
        return frame_of(fused, topics.drop(columns=[c for c in ("docno", "score", "rank") if c in topics.columns]))

    def __repr__(self) -> str:
        return f"kueri.RRF({', '.join(map(repr, self.transformers))}, k={self.k:g})"


def pipeline(name: str, corpus: str | Path, workdir: str | Path | None = None) -> pt.Transformer:
    """The transformer that computes what ``kueri run --config NAME`` computes (Table 1 rows, ``default``,
    ``auto-*``, ``quality-rerank``...): retrieval (or RRF), then the second stage, quality, stance."""
    config = get_config(name)
    return _pipeline_of(config, index(corpus, name, workdir))


def _pipeline_of(config: RunConfig, handle: Index) -> pt.Transformer:
    """The configuration's stages, each in a transformer: its first stage the retriever, then ``>>`` the rest."""
    own = handle.with_analyzer(config.analyzer)
    first, *later = config.stages()
    head: pt.Transformer = FirstStage(first, own)
    for stage in later:
        head = head >> StageTransformer(stage, own)
    return head
