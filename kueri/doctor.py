"""What this machine offers kueri, and which named configurations can run on it (``kueri env``).

:func:`report` gathers it without starting a JVM or an encoder: Python, kueri, the Java kueri would start
and whether it is recent enough, the Lucene jar and its version, onnxruntime with its providers and the
kernels it picks on this CPU, the work folder, WordNet, the optional packages, and for every named
configuration the pieces it lacks here with how to get them. :func:`report_lines` words it for people.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import kueri
from kueri.config import CONFIGS, DEFAULT, RunConfig
from kueri.encoders import ENCODERS
from kueri.environment import (
    RELEVANT_CPU_FLAGS,
    cpu_info,
    distribution_version,
    has_module,
    kernel_path,
    same_bits_as_reference,
)
from kueri.files import human_size
from kueri.lucene import java_status, lucene_status
from kueri.lucene.analyze import WORDNET_DATA_FILES, WORDNET_DIR, WORDNET_INSTALL_HINT

#: The modules of kueri's own dependencies (pyproject.toml) every configuration imports.
CORE_MODULES = {"jnius": "pyjnius", "lxml": "lxml", "nltk": "nltk", "tqdm": "tqdm", "requests": "requests",
                "ir_measures": "ir-measures", "pytrec_eval": "pytrec-eval-terrier", "numpy": "numpy",
                "vaderSentiment": "vaderSentiment", "isal": "isal", "orjson": "orjson"}
#: The encoders' packages (their registry entries'): module -> (distribution, pinned version).
NEURAL_MODULES = {module: (dist, version) for entry in ENCODERS.values() for module, dist, version in entry.packages}
#: Optional extras: name -> (module, distributions, what for).
OPTIONAL = {"pyterrier": ("pyterrier", ("pyterrier", "python-terrier"), "kueri.pyterrier transformers"),
            "ray": ("ray", ("ray",), "--ray ADDRESS (index, quality offline, stance)"),
            "tira": ("tira", ("tira",), "TIRA's client (tira-cli), to submit runs")}


def _size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _pieces(java: dict[str, Any], lucene: dict[str, Any], wordnet: dict[str, Any]) -> dict[str, str | None]:
    """Every piece a configuration may need -> None when present, else what is wrong and how to fix it."""
    core_missing = [dist for module, dist in CORE_MODULES.items() if not has_module(module)]
    pieces: dict[str, str | None] = {
        "java": java["problem"],
        "lucene": lucene["problem"],
        "core": f"missing {', '.join(core_missing)}: pip install kueri" if core_missing else None,
        "wordnet": None if wordnet["present"] else f"no WordNet database in {wordnet['dir']}: {WORDNET_INSTALL_HINT}",
    }
    for module, (dist, version) in NEURAL_MODULES.items():
        pieces[dist] = None if has_module(module) else f"{dist} is not installed: pip install {dist}=={version}"
    return pieces


def needs(config: RunConfig) -> set[str]:
    """The pieces (:func:`_pieces`' names) a configuration needs to run: what its stages say they read."""
    plan = config.plan()
    needed = {"java", "lucene", "core"}
    if any(analyzer.synonyms == "wordnet" for analyzer in plan.indexes()):
        needed.add("wordnet")
    for name in plan.encoders():
        needed |= set(ENCODERS[name].distributions)
    return needed


def report(workdir: str | Path | None = None) -> dict[str, Any]:
    """Everything ``kueri env`` shows, as plain data (its ``--json``). ``ok``: the default configuration can run."""
    from kueri.pipeline import default_workdir

    java, lucene = java_status(), lucene_status()
    model, flags = cpu_info()
    onnx: dict[str, Any] = {"version": distribution_version("onnxruntime"), "providers": []}
    if has_module("onnxruntime"):
        try:
            import onnxruntime

            onnx["providers"] = list(onnxruntime.get_available_providers())
        except Exception as exc:  # noqa: BLE001 - a broken install is reported, not raised
            onnx["problem"] = f"{type(exc).__name__}: {exc}"
    folder = Path(workdir) if workdir else default_workdir()
    work = {"path": str(folder), "exists": folder.is_dir(), "bytes": _size(folder) if folder.is_dir() else 0,
            "writable": os.access(folder if folder.is_dir() else folder.parent, os.W_OK)}
    wordnet = {"dir": str(WORDNET_DIR), "present": all((WORDNET_DIR / name).is_file() for name in WORDNET_DATA_FILES)}
    optional = {name: {"version": distribution_version(*dists) if has_module(module) else None, "for": purpose}
                for name, (module, dists, purpose) in OPTIONAL.items()}
    pieces = _pieces(java, lucene, wordnet)
    configs = {}
    for name, config in CONFIGS.items():
        missing = sorted(piece for piece in needs(config) if pieces.get(piece))
        configs[name] = {"ok": not missing, "missing": missing}
    return {
        "ok": configs[DEFAULT.name]["ok"],
        "python": {"version": sys.version.split()[0], "executable": sys.executable},
        "kueri": {"version": kueri.__version__, "path": str(Path(kueri.__file__).parent)},
        "java": java,
        "lucene": lucene,
        "onnxruntime": onnx,
        "cpu": {"model": model, "flags": [flag for flag in RELEVANT_CPU_FLAGS if flag in flags],
                "kernel_path": kernel_path(flags), "same_bits_as_reference": same_bits_as_reference(flags)},
        "workdir": work,
        "wordnet": wordnet,
        "optional": optional,
        "encoders": {name: _encoder_status(name, folder) for name in ENCODERS},
        "missing": {piece: why for piece, why in pieces.items() if why},  # what is wrong, and the fix
        "configs": configs,
    }


def _encoder_status(name: str, workdir: Path) -> dict[str, Any]:
    """An encoder of the registry: whether it can load here (and why not), and its store in the work folder."""
    from kueri.encoders import store_path

    entry = ENCODERS[name]
    available, why = entry.is_available()
    store = store_path(workdir, entry.store_key)
    return {"available": available, "problem": why or None, "store": str(store),
            "store_bytes": _size(store) if store.is_dir() else 0}


NO_HELPER = "no (KUERI_JAVA_HELPER=0, or stale classes: one writer indexes, topics one by one)"


def report_lines(data: dict[str, Any], every_config: bool = False) -> list[str]:
    """The report in words, a line per item; configurations that cannot run name what they lack
    (``every_config``: every configuration gets a line)."""
    java, lucene, onnx, cpu, work = data["java"], data["lucene"], data["onnxruntime"], data["cpu"], data["workdir"]
    if java["version"]:
        verdict = "ok" if java["ok"] else "TOO OLD"
        tested = "" if java["version"].split(".")[0] == java["tested"] else f", tested on {java['tested']}"
        java_line = (f"{java['version']} at {java['home']}: {verdict} (needs {java['required']}{tested}); "
                     f"Java helper {'yes' if java['helper'] else NO_HELPER}")
    else:
        java_line = f"MISSING: {java['problem']}"
    lucene_line = (f"{lucene['version']} in {lucene['jar']} ({human_size(lucene['bytes'])})" if lucene["ok"]
                   else f"MISSING: {lucene['problem']}")
    if onnx["version"]:
        onnx_line = f"{onnx['version']}; providers {', '.join(onnx['providers']) or onnx.get('problem', '?')}"
    else:
        onnx_line = "not installed (the neural features need it)"
    state = ("" if work["writable"] else ", NOT WRITABLE") + ("" if work["exists"] else ", not created yet")
    optional = ", ".join(f"{name} {info['version']}" if info["version"] else f"{name} -"
                         for name, info in data["optional"].items())
    lines = [
        f"python       {data['python']['version']} ({data['python']['executable']})",
        f"kueri        {data['kueri']['version']} ({data['kueri']['path']})",
        f"java         {java_line}",
        f"lucene       {lucene_line}",
        f"onnxruntime  {onnx_line}",
        f"cpu          {cpu['model'] or '?'}; {' '.join(cpu['flags']) or 'no AVX'}; MLAS kernels: {cpu['kernel_path']}",
        "runs         " + ("the same bits as the reference run (AVX2 and FMA)" if cpu["same_bits_as_reference"] else
                           "may differ slightly from the reference run: no AVX2 and FMA (docs/reproducibility.md)"),
        f"work folder  {work['path']} ({human_size(work['bytes'])}{state})",
        f"wordnet      {data['wordnet']['dir']}: {'present' if data['wordnet']['present'] else 'missing'} "
        "(only for --synonyms wordnet)",
        f"optional     {optional}",
    ]
    for name, status in data["encoders"].items():
        state = "ready" if status["available"] else f"NOT AVAILABLE ({status['problem']})"
        lines.append(f"encoder      {name}: {state}; store {status['store']} ({human_size(status['store_bytes'])})")
    configs = data["configs"]
    runnable = [name for name, status in configs.items() if status["ok"]]
    lines.append(f"configurations: {len(runnable)} of {len(configs)} can run here")
    if every_config and runnable:
        lines.append(f"  ready: {', '.join(runnable)}")
    lacking: dict[tuple[str, ...], list[str]] = {}
    for name, status in configs.items():
        if not status["ok"]:
            lacking.setdefault(tuple(status["missing"]), []).append(name)
    for missing, names in lacking.items():
        lines.append(f"  without {' + '.join(missing)}: {', '.join(names)}")
    for piece, why in data["missing"].items():
        lines.append(f"missing {piece}: {why}")
    default = configs[DEFAULT.name]
    if default["ok"]:
        lines.append("the default configuration can run here")
    else:
        lines.append(f"the default configuration cannot run here: it needs {', '.join(default['missing'])}")
    return lines
