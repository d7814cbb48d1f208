#!/usr/bin/env python3
"""Fine-tune kueri's stance encoder, ``kueri/resources/models/stance-encoder-v1.npz`` (see kueri.stance.encoders).

The command is ``kueri.train.stance.encoder``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stance.encoder import main

if __name__ == "__main__":
    run_script(main)
