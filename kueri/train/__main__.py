"""``python -m kueri.train``: the list of commands; ``python -m kueri.train NAME [OPTIONS]`` runs one."""

import sys

from kueri.cli.script import run_script
from kueri.train.commands import main

if __name__ == "__main__":
    run_script(lambda: main(sys.argv[1:]), "kueri.train")
