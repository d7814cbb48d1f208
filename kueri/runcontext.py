"""A run's context: how a run goes, apart from what it computes.

The configuration (:class:`~kueri.config.RunConfig`) decides the run; this says where its caches go, whether a
user watches progress bars, what a bad corpus line does, how many processes work side by side. A face (the
command line, ``kueri serve``, PyTerrier, TIRA) makes one from its user's flags and hands it to the pipeline,
which gives it to every stage (``context.run_context``): no function between them takes these one by one.
None of it changes a ranking: the same configuration gives the same run in any context.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunContext:
    """``workdir``: the work folder of indexes and caches (None: kueri's default where one is needed, none at all
    for a search of one given index); ``progress``: bars for what a user waits on; ``skip_bad``: skip and count
    bad corpus lines instead of stopping; ``workers``: processes (and Lucene's search threads) side by side, in every
    stage (None: ``KUERI_WORKERS``, else 2 on 2+ cores, resolved once when a session is made: nothing reads the
    environment during a run)."""

    workdir: Path | None = None
    progress: bool = True
    skip_bad: bool = False
    workers: int | None = None

    def resolved_workers(self) -> int:
        from kueri.processes import resolve_workers

        return resolve_workers(self.workers)


#: The context of a library call nobody watches: no progress bars, bad lines stop the run.
QUIET = RunContext(progress=False)


def given_context(given: RunContext | str | Path | None, old: dict[str, Any], who: str) -> RunContext:
    """The context a caller gives: a :class:`RunContext`, or just a work folder (the rest as by default). ``old``:
    the keywords callers gave one by one before (``progress``, ``skip_bad``, ``workers``), still taken for a
    release, with a warning."""
    context = given if isinstance(given, RunContext) else RunContext(Path(given) if given is not None else None)
    unknown = set(old) - {"progress", "skip_bad", "workers"}
    if unknown:
        raise TypeError(f"{who}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if old:
        # a library caller's old keywords: a DeprecationWarning only (a log line would reach a command's user)
        warnings.warn(f"{who}({', '.join(f'{name}=' for name in old)}) is deprecated and goes in the next release: "
                      f"use {who}(..., RunContext(workdir, {', '.join(f'{name}=...' for name in old)}))",
                      DeprecationWarning, stacklevel=3)
        context = replace(context, **old)
    return context
