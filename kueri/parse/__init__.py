"""parse: corpus passages and topics into plain records (the original's parse/ package)."""

from kueri.parse.passages import PassageReader, ReadStats, TextCorpus, read_passages, split_doct5query
from kueri.parse.topics import read_topics

__all__ = ["PassageReader", "ReadStats", "TextCorpus", "read_passages", "read_topics", "split_doct5query"]
