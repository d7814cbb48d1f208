#!/usr/bin/env python3
"""Cross-validate today's stance model against passage models that also read the encoders.

The command is ``kueri.train.stance.cv_encoders``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stance.cv_encoders import main

if __name__ == "__main__":
    run_script(main)
