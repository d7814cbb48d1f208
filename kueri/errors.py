"""Errors that the CLI reports as one clear line instead of a traceback."""


class KueriError(Exception):
    """Bad input or configuration: the message says what and where (file:line where known)."""

    exit_code = 1


class SetupError(KueriError):
    """Something the environment lacks (Java, the Lucene jar, WordNet files): says how to fix it."""

    exit_code = 2
