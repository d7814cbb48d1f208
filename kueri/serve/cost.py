"""What a question is expected to cost, before it is ranked: the probe the queue orders questions by.

A question is ``warm`` when the encoders' stores hold about as many of its first stage's top candidates as the
configuration's stages embed (40 and 15 of the top 100 in the default's cascade), short by at most
:data:`WARM_SHARE`, else ``cold`` (and when the stages cannot tell cheaply: a dense first stage's candidates, or any
failure: a question that fails here fails in its ranking with its message). The stages answer
(:meth:`Plan.cost <kueri.stages.plan.Plan.cost>`); this part only counts what the stores hold. Whether its ranking
is cached is the answer cache's (:mod:`kueri.serve.cache`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from kueri.config import RunConfig
from kueri.records import Topic

log = logging.getLogger(__name__)

#: A question is warm when the stores hold as many of its first stage's top candidates as each encoder embeds, short
#: by at most this share: a quarter of the default's 55, embedded, costs about 0.6 s (a cold question's log: MiniLM
#: 40 passages in 1.7 s, e5 15 in 1.5 s), about a warm question's own cost; a question of new objects is short by
#: all 55.
WARM_SHARE = 0.25


class CostProbe:
    """Probes questions over ``session`` (:class:`~kueri.session.Session`) against the stores of its ``encoders`` (by
    name: the session's stored encoders)."""

    def __init__(self, session: Any, encoders: Collection[str]) -> None:
        self.session, self.encoders = session, encoders

    def stored(self, encoder: str, texts: list[str]) -> int:
        """How many of the passages with ``texts`` the store of ``encoder`` holds (all, for an encoder not stored)."""
        from kueri.encoders import text_digest

        if encoder not in self.encoders:
            return len(texts)
        digests = [text_digest(text) for text in texts]
        return len(digests) - len(self.session.encoder(encoder).store.missing(digests))

    def kind(self, config: RunConfig, topic: Topic) -> str:
        """``warm`` or ``cold`` (see the module); on the pipeline thread."""
        try:
            cost = config.plan().cost(self.session.context([topic]), self.stored)
        except Exception:  # noqa: BLE001 - an estimate only; the ranking reports what is wrong
            log.debug("serve: no cost estimate for %r", topic.title, exc_info=True)
            return "cold"
        return "cold" if cost is None or cost.short > WARM_SHARE * cost.needed else "warm"
