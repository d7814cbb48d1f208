"""kueri.train, the code that builds the shipped models: a package the scripts call, lazy about its extra's imports."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys

import kueri.devtools
import kueri.train
from kueri.train.commands import COMMANDS
from tests.conftest import ROOT

HEAVY = ("jax", "sklearn", "scipy")


def modules() -> list[str]:
    return [info.name for package in (kueri.train, kueri.devtools)
            for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]


def loaded_after(code: str) -> list[str]:
    """The heavy modules (:data:`HEAVY`) imported by ``code`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} "
                           "if m in sys.modules))"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])


def test_kueri_and_its_cli_import_neither_jax_nor_sklearn():
    assert loaded_after("import kueri, kueri.cli") == []


def test_the_training_modules_import_their_extra_only_when_they_fit():
    """Every module of kueri.train and kueri.devtools imports without JAX, scikit-learn or SciPy: the functions that
    fit import them when they run."""
    names = modules()
    assert "kueri.train.stance.tune" in names and "kueri.train.second_stage.train" in names
    assert loaded_after("\n".join(f"import {name}" for name in names)) == []


def test_every_script_is_a_thin_entry_point_of_the_package():
    scripts = {path.stem for path in (ROOT / "scripts").glob("*.py")}
    assert scripts == set(COMMANDS)
    for name, module in COMMANDS.items():
        text = (ROOT / "scripts" / f"{name}.py").read_text(encoding="utf-8")
        assert f"from {module} import main" in text
        assert len(text.splitlines()) <= 15, f"scripts/{name}.py is more than an entry point"
        assert "sys.path" not in text


def test_nothing_edits_sys_path():
    for folder in ("scripts", "benchmarks", "tests", "kueri"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        ast.unparse(node.func.value) == "sys.path":
                    raise AssertionError(f"{path.relative_to(ROOT)}:{node.lineno} edits sys.path")


def test_python_m_kueri_train_lists_the_commands():
    done = subprocess.run([sys.executable, "-m", "kueri.train"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [f"scripts/{name}.py" for name in COMMANDS]
    assert all(len(line.split(None, 1)) == 2 for line in lines)  # each with what it does


def test_one_command_runs_through_python_m_kueri_train():
    done = subprocess.run([sys.executable, "-m", "kueri.train", "tune_stance_passages", "--help"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "--with-part" in done.stdout and "--votes" in done.stdout
