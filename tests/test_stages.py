"""The stage abstraction: one order of stages, and a stage added in one place (the walk-through of
docs/architecture.md) reaches the pipeline, the command line and PyTerrier without touching them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kueri import stages
from kueri.cli import build_parser
from kueri.cli.flags import config_from
from kueri.config import CONFIGS, get_config
from kueri.pipeline import Pipeline
from kueri.records import Hit, Run
from kueri.runcontext import RunContext
from kueri.stages import Context, Option, StageKind
from tests.conftest import SAMPLE_CORPUS, SAMPLE_TOPICS


@dataclass(frozen=True)
class Reverse:
    """Turns each topic's hits upside down (scored 1/rank, so scores still never increase)."""

    name = "reverse"
    needs_objects = False
    adds = ()

    def summary(self) -> str:
        return "reversed"

    def apply(self, run: Run, context: Context) -> Run:
        return {qid: [Hit(hit.doc, 1.0 / rank, hit.stance) for rank, hit in enumerate(reversed(hits), start=1)]
                for qid, hits in run.items()}


def reverse_stage(config: Any) -> Reverse | None:
    return Reverse() if config.reverse else None


# The whole of a stage's registration: its settings declared once (the configuration's, the flag's, PyTerrier's).
REVERSE = StageKind("reverse", reverse_stage, options=(
    Option("reverse", False, "turn every topic's hits upside down", action="store_true", annotation=bool),),
    summary="reversed")


@pytest.fixture
def reverse():
    stages.register(REVERSE, before="stance")
    yield REVERSE
    stages.unregister("reverse")


def test_the_stage_order_is_written_once():
    assert [kind.name for kind in stages.STAGES] == ["retrieval", "second-stage", "quality", "stance"]
    assert [s.name for s in get_config("default").stages()] == ["search", "second-stage", "stance"]
    assert [s.name for s in get_config("row-20").stages()] == ["search", "quality"]
    assert [s.name for s in get_config("row-23").stages()] == ["fuse"]
    assert [s.name for s in get_config("row-16").stages()] == ["feedback"]
    for config in CONFIGS.values():  # the summary is its stages' summaries
        assert config.summary() == "; ".join(s.summary() for s in config.stages())


def test_a_registered_stage_reaches_config_flags_and_summary(reverse):
    assert [kind.name for kind in stages.STAGES] == ["retrieval", "second-stage", "quality", "reverse", "stance"]
    args = build_parser().parse_args(["run", "--corpus", "c", "--topics", "t", "--output", "o", "--config",
                                      "row-15", "--reverse"])
    config = config_from(args)
    assert config.option("reverse") is True and config.reverse is True
    assert get_config("row-15").reverse is False  # the declared default
    assert get_config("row-15").with_changes(reverse=True) == config
    assert "| `reverse` | `False` | `--reverse` |" in stages.settings_table()
    assert [s.name for s in config.stages()] == ["search", "reverse"]
    assert config.summary().endswith("; reversed")
    plain = build_parser().parse_args(["run", "--corpus", "c", "--topics", "t", "--output", "o", "--config", "row-15"])
    assert config_from(plain) is get_config("row-15")


def test_given_candidates_are_a_first_stage_before_the_configurations_later_ones():
    from kueri.stages.given import Given, given_stages

    run = {"1": [Hit("a", 2.0), Hit("b", 1.0)]}
    default = get_config("default")
    given = given_stages(default, run)
    assert [s.name for s in given] == ["given", "second-stage", "stance"]
    assert isinstance(given[0], Given) and given[0].run is run and given[0].hits == default.hits
    # the second stage reads the title search's scores: the candidates are scored by the configuration's search
    assert given[0].scored_by == default.stages()[0]
    assert [s.name for s in given_stages(get_config("row-20"), run)] == ["given", "quality"]
    assert given_stages(get_config("row-20"), run)[0].scored_by is None  # quality reads the given scores
    hybrid = get_config("hybrid-e5").with_changes(second_stage="second-stage-v2")
    assert given_stages(hybrid, run)[0].scored_by == hybrid.stages()[0].lexical
    assert given_stages(get_config("row-23").with_changes(second_stage="second-stage-v2"), run)[0].scored_by is None


@pytest.mark.slow
def test_a_registered_stage_runs_in_the_pipeline(reverse, workdir):
    from kueri.parse import read_topics

    topics = read_topics(SAMPLE_TOPICS)
    with Pipeline(SAMPLE_CORPUS, topics, RunContext(workdir, progress=False)) as pipeline:
        plain = pipeline.run(get_config("row-15"))
        reversed_run = pipeline.run(get_config("row-15").with_changes(reverse=True))
    assert list(reversed_run) == list(plain)
    for qid, hits in plain.items():
        assert [h.doc for h in reversed_run[qid]] == [h.doc for h in reversed(hits)]


@pytest.mark.slow
def test_a_registered_stage_runs_in_pyterrier(reverse, workdir):
    kp = pytest.importorskip("kueri.pyterrier")
    topics = kp.topics(SAMPLE_TOPICS).head(3)
    config = get_config("row-15").with_changes(options=(("reverse", True),))
    index = kp.index(SAMPLE_CORPUS, "row-15", workdir)
    results = kp._pipeline_of(config, index)(topics)
    plain = kp.Retriever(index, "row-15")(topics)
    for qid in topics.qid:
        assert list(results[results.qid == qid].docno) == list(plain[plain.qid == qid].docno)[::-1]


def test_a_stage_owns_its_settings_in_every_face():
    """Each setting is declared once in its stage's module; the configuration's fields, the flags, the PyTerrier
    transformers' parameters and the docs table are made of the declarations."""
    import inspect
    from dataclasses import fields

    from kueri.config import RunConfig

    declared = [option.name for kind in stages.STAGES for option in kind.options]
    own = [f.name for f in fields(RunConfig)]
    assert own[1:1 + len(declared)] == declared  # in stage order, after the name
    assert "weak_score" in own and "paper_ndcg5" in own and "weak_score" not in declared
    assert all(getattr(RunConfig(name="plain"), name) == option.default for name, option in stages.options().items())
    flags = build_parser().parse_args(["run", "--corpus", "c", "--topics", "t", "--output", "o", "--stance-depth",
                                       "all", "--stance-model", "none"])
    assert (flags.stance_depth, flags.stance_model) == ("all", "none")
    kp = pytest.importorskip("kueri.pyterrier")
    assert list(inspect.signature(kp.Stance).parameters) == ["index", "depth", "model"]
    assert list(inspect.signature(kp.SecondStage).parameters) == ["index", "model", "depth", "cascade"]


def test_the_settings_table_of_the_docs_is_the_declarations():
    from pathlib import Path

    docs = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    assert stages.settings_table() in docs
