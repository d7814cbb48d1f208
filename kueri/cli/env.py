"""``kueri env``: what this machine offers kueri and which configurations can run on it (alias ``doctor``)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_env(args: argparse.Namespace) -> int:
    from kueri.doctor import report, report_lines

    data = report(args.workdir)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print("\n".join(report_lines(data, every_config=args.verbose)))
    return 0 if data["ok"] else 1


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("env", aliases=["doctor"], parents=[common],
                       help="Python, Java, Lucene, onnxruntime, CPU, work folder: what is here, what each "
                       "configuration lacks (exit 1: the default cannot run)",
                       description="Checks the environment without starting Java or an encoder: Python and kueri; "
                       "the Java kueri would start (version, whether it is enough); the Lucene jar and its version; "
                       "onnxruntime, its providers and the kernels it picks on this CPU; the work folder; WordNet; "
                       "optional packages; and for every named configuration what it lacks here. Exit code 0 when "
                       "the default configuration can run, 1 when not. -v lists every configuration.")
    p.add_argument("--json", action="store_true", help="the same as JSON, for programs")
    p.add_argument("--workdir", help="the work folder to look at (default: as a run picks it)")
    p.set_defaults(func=cmd_env)
