"""quality: argument-quality scores (a score file ``passage_id<TAB>score``) and run scores times them."""

from kueri.quality.scores import read_quality_scores, times_quality

#: The old name of :func:`times_quality` (deprecated: kept for code that imports it).
rerank = times_quality

__all__ = ["read_quality_scores", "rerank", "times_quality"]
