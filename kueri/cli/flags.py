"""Flags shared by several commands, and their translation into an :class:`~kueri.config.Overrides`.

The commands only parse: what the flags mean for a configuration is decided by
:meth:`kueri.config.RunConfig.with_overrides`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kueri import stages
from kueri.config import Overrides, RunConfig, get_config
from kueri.errors import KueriError
from kueri.records import Topic
from kueri.runcontext import RunContext

if TYPE_CHECKING:
    from kueri.ray_runs import RayRun


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="default",
                        help="named configuration (see `kueri configs`); the flags below replace parts of it")


def add_corpus_or_index(parser: argparse.ArgumentParser, *, corpus: str, index: str) -> None:
    """``--corpus`` or ``--index``, one of them required, with what each means to the command."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", help=corpus)
    source.add_argument("--index", help=index)


def add_workdir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", help="where indexes and caches are kept (default: KUERI_WORKDIR, else the "
                        "checkout's work/, else ~/.cache/kueri/work)")


def add_analyzer_flags(parser: argparse.ArgumentParser) -> None:
    """The analysis' flags (its stage's declaration)."""
    stages.add_flags(parser, "analysis")


def add_ranking_flags(parser: argparse.ArgumentParser) -> None:
    """The ranking's flags (its stage's declaration), then the configuration's own ``--hits`` and ``--tag``."""
    group = stages.add_flags(parser, "ranking")
    group.add_argument("--hits", type=int, help="hits per topic (1000)")
    group.add_argument("--tag", help="run tag (default: the configuration's)")


def add_first_stage_flags(parser: argparse.ArgumentParser) -> None:
    """The first stage's own settings (dense and hybrid search), for commands that run only that stage."""
    stages.add_flags(parser, kinds=("retrieval",), title="dense and hybrid search (vectors made by kueri embed)")


def add_stage_flags(parser: argparse.ArgumentParser) -> None:
    """The settings of every registered stage (:data:`kueri.stages.STAGES`), in run order."""
    stages.add_flags(parser)


def add_later_stage_flags(parser: argparse.ArgumentParser) -> None:
    """The settings of the stages after the first (``kueri rerank``: the candidates are given), in run order."""
    stages.add_flags(parser, kinds=[kind.name for kind in stages.STAGES if kind.name != "retrieval"])


def add_ray_flags(parser: argparse.ArgumentParser) -> None:
    """``--ray``, ``--ray-batch`` and ``--ray-copy-index``: a run's topics as tasks of a Ray cluster."""
    from kueri.scaleout import RAY_BATCH

    group = parser.add_argument_group("Ray (the topics as tasks of a cluster: the same run file)")
    group.add_argument("--ray", metavar="ADDRESS", default=os.environ.get("KUERI_RAY") or None,
                       help="run the stages after the index on a Ray cluster, --ray-batch topics a task: auto, or the "
                       "head's host:port (default: KUERI_RAY; every node needs kueri[ray] and sees the work folder, "
                       "or give --ray-copy-index)")
    group.add_argument("--ray-batch", type=int, metavar="N", default=RAY_BATCH,
                       help=f"topics per Ray task ({RAY_BATCH})")
    group.add_argument("--ray-copy-index", action="store_true",
                       help="send the index to each node once through Ray's object store (nodes that do not see "
                       "the work folder)")


def ray_of(args: argparse.Namespace) -> RayRun | None:
    """What ``--ray`` and its companions ask for (None: run here)."""
    from kueri.ray_runs import RayRun

    return RayRun(args.ray, args.ray_batch, args.ray_copy_index) if args.ray else None


def topics_of(args: argparse.Namespace) -> list[Topic]:
    """The topics ``--topics`` or ``--dataset`` (an ir_datasets id) names."""
    from kueri.parse import read_topics

    if args.dataset:
        from kueri.irds import load_dataset

        return load_dataset(args.dataset).topics()
    return read_topics(args.topics)


def overrides_from(args: argparse.Namespace) -> Overrides:
    """The parts of a configuration the parsed flags replace (flags a command lacks count as not given): the values
    of the stages' settings' flags (:func:`kueri.stages.flag_owners`), and ``--hits``, ``--tag``."""
    given = vars(args)
    return Overrides(hits=given.get("hits"), tag=given.get("tag"),
                     stages={name: given[name] for name in stages.flag_owners() if given.get(name) is not None})


def run_context_of(args: argparse.Namespace) -> RunContext:
    """How the run goes, from the flags a command has: ``--workdir``, ``--skip-bad``, ``--workers``, ``-q``."""
    given = vars(args)
    workdir = given.get("workdir")
    return RunContext(Path(workdir) if workdir else None, progress=given.get("progress", True),
                      skip_bad=bool(given.get("skip_bad")), workers=given.get("workers"))


def config_from(args: argparse.Namespace) -> RunConfig:
    """The named configuration ``--config`` with the flags' overrides."""
    if "config" not in vars(args):
        raise KueriError("this command takes no configuration")
    overrides = overrides_from(args)  # the flags first: then the configuration, which uses no flag
    return get_config(args.config).with_overrides(overrides)
