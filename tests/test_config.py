"""Configurations as data: named configurations, overrides from flags, and what a command says it runs."""

from __future__ import annotations

import logging

import pytest

from kueri.cli import build_parser, main
from kueri.cli.flags import overrides_from
from kueri.config import CONFIGS, Overrides, get_config
from kueri.errors import KueriError
from kueri.lucene import MAIN_ANALYZER, AnalyzerConfig, Similarity
from kueri.runcontext import QUIET
from tests.conftest import SAMPLE_TOPICS


def parsed(*argv: str):
    return build_parser().parse_args(list(argv))


def test_no_override_is_the_configuration_itself():
    default = get_config("default")
    assert default.with_overrides(Overrides()) is default


def test_a_stoplist_override_keeps_the_rest_of_the_analyzer_and_says_so():
    config = get_config("default").with_overrides(Overrides(stoplist="lucene"))
    assert config.analyzer == AnalyzerConfig("lucene", stemmer="porter")
    assert "stoplist lucene, porter stemmer" in config.summary()
    unstemmed = get_config("default").with_overrides(Overrides(stoplist="lucene", stemmer="none"))
    assert unstemmed.analyzer == AnalyzerConfig("lucene")


def test_analyzer_presets_then_single_options():
    assert get_config("row-07").with_overrides(Overrides(analyzer="main")).analyzer == MAIN_ANALYZER
    baseline = get_config("row-15").with_overrides(Overrides(analyzer="baseline", tokenizer="letter"))
    assert baseline.analyzer == AnalyzerConfig("lucene", tokenizer="letter")


def test_similarity_and_ranking_overrides():
    config = get_config("row-01").with_overrides(Overrides(similarity="lmd", mu=1000.0, hits=10, tag="mine",
                                                           fields=(("contents", 2.0),), filter_objects="fixed"))
    assert config.similarity == Similarity("lmd", mu=1000.0)
    assert (config.hits, config.tag, config.fields, config.filter_objects) == (10, "mine", (("contents", 2.0),),
                                                                                "fixed")
    assert get_config("row-01").with_overrides(Overrides(k1=0.9)).similarity == Similarity("bm25", k1=0.9)


def test_none_switches_a_stage_off():
    with pytest.warns(DeprecationWarning, match="--stance-depth 0 is deprecated.*--stance-model none"):
        config = get_config("default").with_overrides(Overrides(stages={"second_stage": "none", "stance_depth": 0}))
    assert config.second_stage is None and config.stance_depth is None
    assert [stage.name for stage in config.stages()] == ["search"]
    off = get_config("default").with_overrides(Overrides(stages={"second_stage": "none", "stance_model": "none"}))
    assert off.stance_model is None and off == config.with_changes(stance_depth=1000)
    reranked = get_config("row-15").with_overrides(Overrides(stages={"quality_rerank": "offline"}))
    assert reranked.quality_rerank == "offline" and "quality rerank (offline)" in reranked.summary()
    assert get_config("row-20").with_overrides(Overrides(stages={"quality_rerank": "none"})).quality_rerank is None


def test_one_meaning_per_word():
    """A depth of None (``all``) is every hit, a model or source None (``none``) a stage off, in every face."""
    every = get_config("row-15").with_overrides(Overrides(stages={"stance_depth": "all"}))
    assert every.stance_depth is None and every.stance_model
    assert every.stages()[-1].summary() == "stance of every hit"
    top = get_config("row-15").with_overrides(Overrides(stages={"stance_depth": 10}))  # a depth alone turns it on
    assert (top.stance_depth, top.stance_model) == (10, get_config("default").stance_model)
    from kueri.stance.family import DEFAULT

    assert get_config("default").stance_model == DEFAULT
    with pytest.warns(DeprecationWarning, match="--quality debater is deprecated.*debater-2022"):
        old = get_config("row-15").with_overrides(Overrides(stages={"quality_rerank": "debater"}))
    assert old.quality_rerank == "debater-2022" == get_config("row-20").quality_rerank


def test_old_spellings_still_work_for_a_release_with_a_warning(caplog):
    from kueri.quality.offline import quality_scores_for
    from kueri.stance.label import checked_depth

    with pytest.warns(DeprecationWarning, match="a stance depth of 0 is deprecated.*None"):
        assert checked_depth(0) is None  # kueri stance --depth 0 and label_run(depth=0): every hit
    assert checked_depth(None) is None and checked_depth(5) == 5
    with pytest.raises(KueriError, match="depth must be at least 1"):
        checked_depth(-1)
    with pytest.warns(DeprecationWarning, match="the quality source 'debater' is deprecated.*'debater-2022'"):
        old = quality_scores_for("debater")
    assert old == quality_scores_for("debater-2022") and len(old) == 64382
    assert "deprecated" in caplog.text  # a user of the command line reads it in the log
    stance = parsed("stance", "run", "--corpus", "c", "--topics", "t", "--output", "o", "--depth", "all")
    default = parsed("stance", "run", "--index", "i", "--topics", "t", "--output", "o")
    assert stance.depth == "all" and default.depth == 50


def test_bad_overrides_are_clear_errors():
    with pytest.raises(KueriError, match="unknown search field"):
        get_config("row-01").with_overrides(Overrides(fields=(("title", 1.0),)))
    with pytest.raises(KueriError, match="unknown analyzer 'lucene'"):
        get_config("row-01").with_overrides(Overrides(analyzer="lucene"))
    with pytest.raises(KueriError, match="unknown similarity"):
        get_config("row-01").with_overrides(Overrides(similarity="dfr"))
    with pytest.raises(KueriError, match="unknown stoplist 'nope'"):
        get_config("row-01").with_overrides(Overrides(stoplist="nope"))


def test_flags_become_overrides():
    args = parsed("run", "--corpus", "c", "--topics", "t", "--output", "o", "--config", "row-07", "--lmd", "--mu",
                  "500", "--stemmer", "none", "--fields", "contents=2", "docT5Query=1", "--quality", "none",
                  "--stance-depth", "0")
    assert overrides_from(args) == Overrides(stemmer="none", similarity="lmd", mu=500.0,
                                             fields=(("contents", 2.0), ("docT5Query", 1.0)),
                                             stages={"quality_rerank": "none", "stance_depth": 0})
    assert overrides_from(parsed("index", "--corpus", "c", "--index", "i")) == Overrides()


def test_flags_a_command_lacks_are_not_overrides():
    tira = parsed("tira", "-i", "in", "-o", "out", "--second-stage", "second-stage-v1")
    assert overrides_from(tira) == Overrides(stages={"second_stage": "second-stage-v1"})


def test_output_flags_stand_before_or_after_the_command():
    assert parsed("-q", "configs").quiet and parsed("configs", "-q").quiet
    assert parsed("--debug", "configs").debug and parsed("configs", "--debug").debug
    assert not parsed("configs").verbose


def test_every_named_configuration_describes_itself():
    for name, config in CONFIGS.items():
        assert config.name == name or name == "baseline"
        assert config.summary() and "hits" in config.summary()
    assert "RRF (k=30) of row-10, row-14, row-15, row-16, row-17" in get_config("row-23").summary()
    assert "graded relevance feedback" in get_config("row-16").summary()


def test_index_says_which_analysis_it_uses(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a___1", "contents": "Cats are better than dogs."}\n', encoding="utf-8")
    assert main(["index", "--corpus", str(corpus), "--index", str(tmp_path / "i"), "--stoplist", "kueristopv2"]) == 0
    err = capsys.readouterr().err
    assert "standard tokenizer, lower case, stoplist kueristopv2, porter stemmer" in err
    assert "indexed 1" in err


def test_quiet_keeps_warnings_and_debug_shows_tracebacks(tmp_path, capsys):
    assert main(["-q", "configs"]) == 0
    assert main(["-q", "index", "--corpus", str(tmp_path / "missing.jsonl"), "--index", str(tmp_path / "i")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kueri: error:") and "Traceback" not in err
    assert main(["index", "--corpus", str(tmp_path / "missing.jsonl"), "--index", str(tmp_path / "i"),
                 "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_the_library_logs_and_never_prints(tmp_path, capsys, caplog):
    from kueri.pipeline import index_corpus

    caplog.set_level(logging.INFO, logger="kueri")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a___1", "contents": "x"}\n{"id": "a___2", "contents": "y"}\n', encoding="utf-8")
    index_corpus(corpus, tmp_path / "i", AnalyzerConfig(), QUIET).close()
    assert "indexed 2" in caplog.text
    out = capsys.readouterr()
    assert out.out == "" and "indexed" not in out.err
    with pytest.warns(DeprecationWarning, match=r"index_corpus\(progress=\) is deprecated"):
        index_corpus(corpus, tmp_path / "j", AnalyzerConfig(), progress=False).close()  # the old keywords, a release


def test_resources_command_and_module(capsys):
    from kueri import resources

    for name in resources.FOLDERS:
        assert resources.path(name).is_dir()
    assert main(["resources", "sample"]) == 0
    assert capsys.readouterr().out.strip() == str(SAMPLE_TOPICS.parent)
    assert main(["resources", "qrels", "touche-task2-2022-relevance.qrels"]) == 0
    assert capsys.readouterr().out.strip().endswith("touche-task2-2022-relevance.qrels")
    assert main(["resources", "weights"]) == 2  # a setup error naming the known ones
    assert "known: sample" in capsys.readouterr().err


def test_run_tags_are_the_originals():
    assert get_config("row-15").run_tag == "seupd2122-kueri_kueristopv2_BM2_false_porter"
    assert get_config("row-07").run_tag == "seupd2122-kueri_kueristopv2_BM2_false"
