"""The architecture, checked: only the Lucene layer speaks Java, layers import downwards, no import cycles."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "kueri"
#: Layers from the bottom up; a module may import its own layer and the ones below, never above.
LAYERS = {
    "data": {"kueri", "kueri.errors", "kueri.records", "kueri.files", "kueri.runfile", "kueri.progress",
             "kueri.resources", "kueri.parse", "kueri.environment", "kueri.model_files"},
    "lucene": {"kueri.lucene"},
    "encoders": {"kueri.encoders"},
    "stages": {"kueri.fusion", "kueri.evaluate", "kueri.quality", "kueri.second_stage", "kueri.stance",
               "kueri.dense"},
    "pipeline": {"kueri.stages", "kueri.config", "kueri.indexes", "kueri.session", "kueri.pipeline",
                 "kueri.workfolder", "kueri.doctor", "kueri.ray_runs", "kueri.ray_tasks"},
    "face": {"kueri.cli", "kueri.__main__", "kueri.pyterrier", "kueri.serve"},
    # the code that builds the shipped models, and the other developer commands: nothing in kueri imports them
    "train": {"kueri.train", "kueri.devtools"},
}
ORDER = list(LAYERS)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    best = max((prefix for names in LAYERS.values() for prefix in names
                if module == prefix or module.startswith(prefix + ".")), key=len)
    return next(layer for layer, names in LAYERS.items() if best in names)


def imports(path: Path) -> set[str]:
    """The modules ``path`` imports (absolute names; relative imports resolved), at any depth of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def kueri_modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def test_only_the_lucene_layer_imports_the_bridge():
    for module, path in kueri_modules().items():
        names = imports(path)
        java = {n for n in names if n.split(".")[0] == "jnius" or n.startswith("kueri.lucene.jvm")}
        if module == "kueri.lucene.jvm":
            continue
        if java:
            assert module.startswith("kueri.lucene"), f"{module} imports {sorted(java)}"
    # scripts use the library as a user would (benchmarks may time the JVM start)
    for path in (ROOT / "scripts").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "autoclass" not in text and "lucene()" not in text, f"{path} drives Java itself"


def test_every_java_class_is_looked_up_in_one_table():
    for path in (PACKAGE / "lucene").glob("*.py"):
        if path.name != "jvm.py":
            assert "autoclass" not in path.read_text(encoding="utf-8"), path


def test_layers_import_only_downwards():
    modules = kueri_modules()
    for module, path in modules.items():
        own = ORDER.index(layer_of(module))
        for name in imports(path):
            if name.split(".")[0] != "kueri" or name not in modules or name == "kueri":
                continue
            assert ORDER.index(layer_of(name)) <= own, f"{module} ({ORDER[own]}) imports {name} ({layer_of(name)})"


def test_the_encoders_know_no_task():
    """The encoders compute (a cross-encoder: text pairs in, class probabilities out); masking a topic's objects and
    writing a stance model's hypotheses belong to kueri.stance."""
    for module, path in kueri_modules().items():
        if module.startswith("kueri.encoders"):
            task = {n for n in imports(path) if n.startswith(("kueri.stance", "kueri.objects"))}
            assert not task, f"{module} imports {sorted(task)}"


def test_the_encoders_read_model_files_without_the_tfidf_module():
    """The model-file format (kueri.model_files) is shared by the encoders, quality and stance; TF-IDF is the
    quality and stance models' own, so the encoders never import it."""
    found = False
    for module, path in kueri_modules().items():
        if module.startswith("kueri.encoders"):
            names = imports(path)
            found = found or "kueri.model_files" in names
            tfidf = {n for n in names if n == "kueri.tfidf" or n.startswith("kueri.tfidf.")}
            assert not tfidf, f"{module} imports {sorted(tfidf)}"
    assert found, "no encoder module reads model files through kueri.model_files: the check looks in vain"


def test_no_import_cycles():
    modules = kueri_modules()
    edges = {m: {n for n in imports(p) if n in modules and n != m} for m, p in modules.items()}
    for module in modules:  # a package's __init__ re-exporting its own modules is not a cycle
        if modules[module].name == "__init__.py":
            edges[module] = {n for n in edges[module] if not n.startswith(module + ".")}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges[module]):
            assert state.get(target) != 1, "import cycle: " + " -> ".join([*path, module, target])
            if target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [])
