"""Each passage's source link: the corpus' ``chatNoirUrl``, derived from the passage's id wherever it can be."""

from __future__ import annotations

import uuid
from pathlib import Path


def chatnoir_url(passage_id: str) -> str | None:
    """ChatNoir's cached copy of a ClueWeb12 passage's document, as the corpus' ``chatNoirUrl`` writes it; None for
    an id that is not ClueWeb12's. ChatNoir names a document ``uuid5(NAMESPACE_URL, "clueweb12:" + id)``."""
    document = passage_id.split("___", 1)[0]
    if not document.startswith("clueweb12-"):
        return None
    name = uuid.uuid5(uuid.NAMESPACE_URL, "clueweb12:" + document)
    return f"https://chatnoir.eu/cache?uuid={name}&index=cw12&raw&plain"


class SourceLinks:
    """Each passage's source link, the corpus' ``chatNoirUrl``: derived from the id by :func:`chatnoir_url`, which
    gives the corpus' own URL wherever it has one, except for the passages kept in ``exceptions`` (no URL in the
    corpus, about 5 %, or another one), so the server holds a few ids instead of every passage's URL."""

    def __init__(self, exceptions: dict[str, str | None] | None = None) -> None:
        self.exceptions = exceptions or {}

    @classmethod
    def of_corpus(cls, corpus: str | Path) -> SourceLinks:
        from kueri.parse import PassageReader

        return cls({p.id: p.chatnoir_url for p in PassageReader(corpus, skip_bad=True)
                    if p.chatnoir_url != chatnoir_url(p.id)})

    def url(self, passage_id: str) -> str | None:
        return self.exceptions[passage_id] if passage_id in self.exceptions else chatnoir_url(passage_id)
