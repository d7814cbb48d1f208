#!/usr/bin/env python3
"""A screenshot of a running ``kueri serve`` page answering a question (docs/serve-page.png).

The command is ``kueri.devtools.serve_screenshot``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.serve_screenshot import main

if __name__ == "__main__":
    run_script(main)
