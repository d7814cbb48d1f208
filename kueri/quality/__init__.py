"""quality: argument-quality scores (a score file ``passage_id<TAB>score``) and reranking by them."""

from kueri.quality.rerank import read_quality_scores, rerank

__all__ = ["read_quality_scores", "rerank"]
