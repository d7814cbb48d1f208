#!/usr/bin/env python3
"""Which computations give the same bits on other CPUs: onnxruntime's operators, numpy's, and kueri's encoders.

The command is ``kueri.devtools.kernels``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.kernels import main

if __name__ == "__main__":
    run_script(main)
