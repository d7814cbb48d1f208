"""kueri: argument retrieval for comparative questions, a Python port of Kueri on real Lucene."""

__version__ = "0.1.0"
