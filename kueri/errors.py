"""Errors that the CLI reports as one clear line instead of a traceback, each with its exit code.

=========  ==========================================================================
exit code  meaning
=========  ==========================================================================
1          bad input or configuration (:class:`KueriError`): names the file and line
2          something to install or set up (:class:`SetupError`), or a usage error
3          the environment (:class:`EnvironmentProblem`): disk full, permission denied,
           read-only filesystem, an output path that is a file; names the path
130, 143   interrupted by SIGINT / SIGTERM (:class:`Interrupted`)
=========  ==========================================================================
"""

from __future__ import annotations

import errno


class KueriError(Exception):
    """Bad input or configuration: the message says what and where (file:line where known)."""

    exit_code = 1


class SetupError(KueriError):
    """Something the environment lacks (Java, the Lucene jar, WordNet files): says how to fix it."""

    exit_code = 2


class EnvironmentProblem(KueriError):
    """The machine refused: a full disk, a permission, a read-only filesystem, a path in the way."""

    exit_code = 3


class EmptyRun(KueriError):
    """A run in which no topic retrieved anything (a question whose words the index does not hold)."""


class BrokenCache(KueriError):
    """A work-folder entry that cannot be used as it is (damaged, truncated, incomplete): rebuild it."""


class IncompatibleIndex(BrokenCache):
    """A whole index that this kueri must not search: written by another Lucene major, or with another
    analysis than asked for. One line for an index given by path; a rebuild for a work-folder entry."""


class Interrupted(BaseException):
    """SIGTERM (or SIGINT) arrived: like KeyboardInterrupt, it unwinds so partial files are removed."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(f"signal {signal_number}")
        self.exit_code = 128 + signal_number


#: OS errors that are the machine's answer rather than a bug: reported as one line, exit code 3.
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR,
                      errno.EISDIR, errno.EEXIST, errno.ENOENT, errno.EMFILE, errno.ENFILE, errno.EIO, errno.EFBIG}


def environment_problem(exc: OSError) -> EnvironmentProblem:
    """An OSError as one line: the path and the cause (``/out/run.txt: No space left on device``)."""
    where = exc.filename if exc.filename is not None else "kueri"
    return EnvironmentProblem(f"{where}: {exc.strerror or exc}")


def deprecated(old: str, new: str) -> None:
    """Say that ``old`` (a flag's or an argument's old spelling) still works for this release and ``new`` is how to
    say it now: a logged warning for a user of the command line, a DeprecationWarning for a caller of the library."""
    import logging
    import warnings

    message = f"{old} is deprecated and goes in the next release: use {new}"
    logging.getLogger("kueri").warning("%s", message)
    warnings.warn(message, DeprecationWarning, stacklevel=3)
