#!/usr/bin/env python3
"""Does a passage that is one comparative sentence keep that sentence's side? CompSent-19's held-out half through
``kueri stance``, each sentence a one-passage topic.

The command is ``kueri.train.stance.one_sentence``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stance.one_sentence import main

if __name__ == "__main__":
    run_script(main)
