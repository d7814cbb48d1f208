"""The stage abstraction: what a stage is, what a run gives it (its context), and the ordered registry.

A :class:`Stage` turns a run into a run (``apply(run, context)``; the first stage of a configuration
retrieves, so it gets an empty run). A :class:`StageKind` is a stage's registration: how a
configuration asks for it (``build(config)`` returns the stage, or None when the configuration leaves
it off) and its settings (:class:`Option`, each a configuration field and a command-line flag). The
order of :data:`STAGES` is the order a run applies them in; the pipeline, the command line and
``kueri.pyterrier`` are all generated from it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kueri.errors import KueriError
from kueri.lucene import AnalyzerConfig, LuceneIndex
from kueri.parse import TextCorpus
from kueri.records import Run, Texts, Topic
from kueri.runcontext import RunContext
from kueri.stages.settings import Option, add_option_flags

T = TypeVar("T")


class Context(Protocol):
    """What the stages of one run share: the corpus and its indexes, the topics, the passage texts, how the run
    goes (``run_context``: the work folder of caches, progress bars, bad lines, workers), the encoders and other
    objects loaded once (models), nested runs (fusion). A session (:class:`kueri.session.Session`) gives one per
    run (:meth:`~kueri.session.Session.context`)."""

    corpus: str | Path | TextCorpus  # its files, or passages given with their texts (given candidates)
    topics: list[Topic]
    run_context: RunContext  # its workdir None: no work folder (a search of one given index); nothing is cached

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex: ...

    def texts(self, who: str) -> Texts: ...

    def run_named(self, name: str) -> Run: ...

    def encoder(self, name: str) -> Any: ...

    def shared(self, key: Hashable, make: Callable[[], T]) -> T: ...


#: How many passages' embeddings an encoder's store holds, of the passages with these texts (what a cost probe
#: reads: :meth:`Stage.cost`).
Stored = Callable[[str, list[str]], int]


@dataclass(frozen=True)
class Cost:
    """What one question costs a stage beyond what a warm question costs: of the passages whose embeddings it reads
    (``needed``), how many its encoders' stores lack (``short``); Cost() is nothing beyond."""

    short: int = 0
    needed: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.short + other.short, self.needed + other.needed)


class Stage(Protocol):
    """One step of a run: ``name`` (short), ``summary()`` (one line, for ``kueri configs -v`` and logs),
    ``needs_objects`` (reads the topics' two objects), ``adds`` (result columns it adds, e.g. ``stance``) and
    ``apply(run, context)``.

    The other members are what a stage can say of itself, each optional (:class:`StageDefaults` gives the defaults,
    and :func:`capability` gives them to a stage that does not inherit it); callers ask a run's stages through
    :class:`~kueri.stages.plan.Plan`, which gathers the answers, never by a stage's type. A fused stage answers from
    the stages of the runs it fuses.

    - ``reads_title_scores``: it reads the scores of the configuration's title search, not just any first stage's
      (given candidates are scored by that search first, :mod:`kueri.stages.given`);
    - ``orders_topics``: its run lists the topics by number (:func:`~kueri.records.topic_key`), not in the order it
      got them (a run made of batches of topics is then sorted so, :mod:`kueri.ray_runs`);
    - ``reads_judgments``: it reads relevance judgments (a manual run);
    - ``indexes()``: the analyses of the indexes it reads; ``embeds()``: the encoders of :mod:`kueri.encoders`
      whose passage embeddings it reads (a server embeds the corpus ahead with them);
    - ``title_search()``: a first stage's title search (the stage itself, or its lexical half; None: none);
    - ``prepare(context)``: make ahead, in the work folder, what its run will read (a dense search's vectors);
    - ``embedded_depths(default_depth)``: per encoder, how many of a topic's top candidates it embeds;
    - ``probe(context)``: its run when that is cheap to know (a first stage's; None: it is not);
    - ``cost(run, context, stored)``: what a question costs it beyond a warm one's, given the run it gets (None:
      not known cheaply); None: unknown;
    - ``explain(run, context)``: the sentence that decided each label it gives, by passage id ({}: it explains
      none)."""

    name: str
    needs_objects: bool
    adds: tuple[str, ...]

    def summary(self) -> str: ...

    def apply(self, run: Run, context: Context) -> Run: ...


class StageDefaults:
    """What most stages are (a stage class may inherit it, see :class:`Stage`): it reads no topic objects, adds no
    result column, reads no title-search scores, keeps the topics in the order it got them, reads no judgments, no
    index, no passage embeddings, has no title search, prepares nothing, costs a question nothing beyond a warm
    one's when it reads no passage embeddings (else: unknown), is not cheap to probe, and explains nothing."""

    needs_objects: bool = False
    adds: tuple[str, ...] = ()
    reads_title_scores: bool = False
    orders_topics: bool = False
    reads_judgments: bool = False

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return ()

    def embeds(self) -> tuple[str, ...]:
        return ()

    def title_search(self) -> Any:
        return None

    def prepare(self, context: Context) -> None:
        return None

    def embedded_depths(self, default_depth: int) -> dict[str, int]:
        return {}

    def probe(self, context: Context) -> Run | None:
        return None

    def cost(self, run: Run | None, context: Context, stored: Stored) -> Cost | None:
        return Cost() if not capability(self, "embeds")() else None

    def explain(self, run: Run, context: Context) -> dict[str, str | None]:
        return {}


def capability(stage: Stage, name: str) -> Any:
    """The optional member ``name`` of ``stage`` (:class:`Stage`): its own, else :class:`StageDefaults`' (bound to the
    stage: a stage of one's own need not know them)."""
    found = getattr(stage, name, None)
    if found is not None:
        return found
    default = getattr(StageDefaults, name)
    return default.__get__(stage) if callable(default) else default


def stored_encoder(context: Context, name: str) -> Any:
    """The encoder ``name`` of :mod:`kueri.encoders` as the context's stages use it: loaded once per session, with its
    passage embeddings in its store in the work folder (read from it and added to it), or plain without one."""
    return context.encoder(name)


@dataclass(frozen=True)
class StageKind:
    """A stage's registration: ``build(config)`` is the stage a configuration asks for (None: not this run),
    ``options`` its settings (the configuration's fields, flags and transformer parameters are made of them: kueri's
    own stages declare them as the fields of a settings class, :func:`~kueri.stages.settings.options_of`) and
    ``check(config)`` raises a :class:`~kueri.errors.KueriError` when they do not go together."""

    name: str
    build: Callable[[Any], Stage | None]
    options: tuple[Option, ...] = ()
    summary: str = ""
    check: Callable[[Any], None] | None = None


#: Every stage, in the order a run applies them.
STAGES: list[StageKind] = []


def register(kind: StageKind, *, before: str | None = None) -> StageKind:
    """Add ``kind`` to the stage order: last, or just before the stage named ``before``."""
    if any(k.name == kind.name for k in STAGES):
        raise KueriError(f"a stage named {kind.name!r} is already registered")
    names = [k.name for k in STAGES]
    if before is not None and before not in names:
        raise KueriError(f"no stage named {before!r} to register {kind.name!r} before; known: {', '.join(names)}")
    STAGES.insert(names.index(before) if before is not None else len(STAGES), kind)
    return kind


def unregister(name: str) -> None:
    STAGES[:] = [k for k in STAGES if k.name != name]


def compile_stages(config: Any) -> list[Stage]:
    """The stages ``config`` asks for, in run order."""
    return [stage for kind in STAGES if (stage := kind.build(config)) is not None]


def options() -> dict[str, Option]:
    """Every registered stage's settings by name."""
    return {option.name: option for kind in STAGES for option in kind.options}


def kind_named(name: str) -> StageKind:
    for kind in STAGES:
        if kind.name == name:
            return kind
    raise KueriError(f"no stage named {name!r}; known: {', '.join(k.name for k in STAGES)}")


def settings_table() -> str:
    """Every registered stage's settings as the Markdown table of docs/architecture.md, in run order."""
    rows = ["| setting | default | flag | PyTerrier | meaning |", "| --- | --- | --- | --- | --- |"]
    for kind in STAGES:
        rows.append(f"| **{kind.name}** | | | | {kind.summary} |")
        rows.extend(option.row() for option in kind.options)
    return "\n".join(rows)


def add_flags(parser: Any, group: str = "stages", kinds: Any = None, title: str | None = None) -> Any:
    """The flags of the registered stages' settings of the flag group ``group`` (:data:`~kueri.stages.settings.
    FLAG_GROUPS`; ``kinds``: of those stages only, by name), in stage order (``kueri run``, ``kueri tira``); the
    argparse group they went in."""
    return add_option_flags(parser, [option for kind in STAGES if kinds is None or kind.name in kinds
                              for option in kind.options], group, title)


def flag_owners() -> dict[str, Option]:
    """Every registered setting by the names of its flags' values (:attr:`~kueri.stages.settings.Option.dests`)."""
    return {dest: option for kind in STAGES for option in kind.options for dest in option.dests}
