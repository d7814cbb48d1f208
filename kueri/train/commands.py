"""The commands of ``scripts/``: each script is a few lines that call the ``main`` of a module here or in
:mod:`kueri.devtools`. ``python -m kueri.train`` lists them (one line each, from each module's docstring, without
importing it); ``python -m kueri.train NAME [OPTIONS]`` runs one as its script does.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

#: Script name -> the module whose ``main`` it calls; the training commands first, then the other developer tools.
COMMANDS: dict[str, str] = {
    "train_quality": "kueri.train.quality",
    "train_second_stage": "kueri.train.second_stage.train",
    "train_stance": "kueri.train.stance.v1",
    "train_stance_encoder": "kueri.train.stance.encoder",
    "train_stance_passages": "kueri.train.stance.passages",
    "tune_stance_passages": "kueri.train.stance.tune",
    "build_web_passages": "kueri.train.web_passages",
    "derive_stoplists": "kueri.train.stoplists",
    "learn_evidence_threshold": "kueri.train.evidence",
    "cv_stance_encoders": "kueri.train.stance.cv_encoders",
    "stance_one_sentence": "kueri.train.stance.one_sentence",
    "cv_cascade": "kueri.train.second_stage.cascade",
    "cv_dense": "kueri.train.second_stage.dense",
    "cv_comparative_feature": "kueri.train.second_stage.comparative",
    "cv_aspect": "kueri.train.aspect",
    "make_corpus": "kueri.devtools.corpus",
    "compare_kernels": "kueri.devtools.kernels",
    "kernel_noise": "kueri.devtools.kernel_noise",
    "table1": "kueri.devtools.table1",
    "plot_per_topic": "kueri.devtools.per_topic_plot",
    "tira_inputs": "kueri.devtools.tira_inputs",
    "compile_java_helper": "kueri.devtools.java_helper",
    "serve_screenshot": "kueri.devtools.serve_screenshot",
}


def summary(module: str) -> str:
    """The first line of ``module``'s docstring, read from its file (the module is not imported)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def listing() -> str:
    """One line a command: its script and what it does."""
    width = max(len(name) for name in COMMANDS) + len("scripts/.py")
    return "\n".join(f"{'scripts/' + name + '.py':{width}s}  {summary(module)}" for name, module in COMMANDS.items())


def main(argv: Sequence[str]) -> int:
    """List the commands, or run one: ``NAME [OPTIONS]`` (``scripts/NAME.py`` or its module's ``main``)."""
    if not argv or argv[0] in ("-h", "--help", "list"):
        print("kueri's training and developer commands (python -m kueri.train NAME --help, or scripts/NAME.py):")
        print(listing())
        return 0
    name = Path(argv[0]).stem
    if name not in COMMANDS:
        print(f"unknown command {argv[0]!r}: python -m kueri.train lists them")
        return 2
    return importlib.import_module(COMMANDS[name]).main(list(argv[1:])) or 0
