"""kueri as a package: a wheel built from the checkout, installed into a fresh venv, run from elsewhere.

No checkout is on the path of the installed command: the stoplists, models and the sample come from the
wheel's package data. The run must be the checkout's run, byte for byte (on a few topics: a run is made topic
by topic).
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
import venv
import zipfile
from importlib.metadata import Distribution, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import FEW_TOPICS, ROOT, SAMPLE, lines_of_topics, run_command, write_topics

pytestmark = pytest.mark.slow

PYSERINI = "pyserini==0.25.0"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin folder of a fresh venv into which pip installed the wheel.

    The wheel's dependencies are this environment's, linked into the venv rather than unpacked again (hundreds of
    megabytes): exactly the closure of the requirements the wheel declares, and pyserini (which docs/install.md has
    installed --no-deps, for its Lucene jar). pip, with no index, must find each declared requirement satisfied, and
    a package the wheel uses without declaring it is missing from the venv.
    """
    dist = tmp_path_factory.mktemp("dist")
    built = run_command([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)])
    assert built.returncode == 0, built.stderr
    wheels = list(dist.glob("kueri-*.whl"))
    assert len(wheels) == 1, wheels
    target = tmp_path_factory.mktemp("venv")
    venv.create(target, with_pip=False)
    site = next((target / "lib").glob("python3*/site-packages"))
    pyserini = distribution("pyserini")
    assert f"pyserini=={pyserini.version}" == PYSERINI
    for needed in [*requirement_closure(declared_requirements(wheels[0])), pyserini]:
        link_distribution(needed, site)
    result = subprocess.run([sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install", "-q",
                             "--no-index", "--disable-pip-version-check", str(wheels[0])],
                            cwd=dist, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return target / "bin"


def declared_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(name)).get_all("Requires-Dist") or []


def requirement_closure(requirements: list[str]) -> list[Distribution]:
    """This environment's distributions that ``requirements`` need, with theirs, recursively (no extra but those
    asked for by a requirement)."""
    found: dict[str, Distribution] = {}
    pending = [(line, "") for line in requirements]
    seen = set()
    while pending:
        line, extra = pending.pop()
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        for wanted in ("", *sorted(requirement.extras)):
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            found[name] = distribution(requirement.name)
            assert requirement.specifier.contains(found[name].version, prereleases=True), (line, found[name].version)
            pending.extend((child, wanted) for child in found[name].requires or ())
    return list(found.values())


def link_distribution(installed: Distribution, site: Path) -> None:
    """An installed distribution's top-level files and folders, linked into another environment's site-packages."""
    assert installed.files is not None, f"{installed.metadata['Name']} has no RECORD"
    origin = Path(installed.locate_file(""))
    for top in {file.parts[0] for file in installed.files} - {"..", "__pycache__"}:
        if not (site / top).exists():
            (site / top).symlink_to(origin / top)


def clean_env() -> dict[str, str]:
    """The environment without this checkout on PYTHONPATH (the installed package must stand alone)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KUERI_WORKDIR")}


def test_the_installed_package_is_not_the_checkout(installed, tmp_path):
    result = subprocess.run([str(installed / "python"), "-c", "import kueri, kueri.resources as r; "
                             "print(kueri.__file__); print(r.path('stoplists', 'kueristopv2.txt'))"],
                            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    module, stoplist = result.stdout.split()
    assert "site-packages" in module and not module.startswith(str(ROOT))
    assert Path(stoplist).is_file() and "site-packages" in stoplist


def test_the_wheel_ships_the_java_helper_compiled(installed, tmp_path):
    """No javac needed after pip install: the classes come in the wheel and match their sources."""
    result = subprocess.run([str(installed / "python"), "-c", "from kueri.lucene.javahelper import shipped_classes; "
                             "print(shipped_classes())"], cwd=tmp_path, env=clean_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "site-packages" in result.stdout and result.stdout.strip().endswith("java/classes")


def test_kueri_configs_and_resources_from_another_directory(installed, tmp_path):
    configs = subprocess.run([str(installed / "kueri"), "configs"], cwd=tmp_path, env=clean_env(),
                             capture_output=True, text=True, timeout=120)
    assert configs.returncode == 0, configs.stderr
    assert configs.stdout.startswith("default") and "row-24" in configs.stdout
    sample = subprocess.run([str(installed / "kueri"), "resources", "sample"], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, timeout=120)
    assert sample.returncode == 0 and (Path(sample.stdout.strip()) / "topics.xml").is_file()


def test_kueri_tira_from_the_wheel_equals_the_checkouts_default_run(installed, tmp_path, default_tira_run):
    sample = Path(subprocess.run([str(installed / "kueri"), "resources", "sample"], cwd=tmp_path, env=clean_env(),
                                 capture_output=True, text=True, timeout=120).stdout.strip())
    for name in ("passages.jsonl.gz", "topics.xml"):  # the wheel ships the sample whole
        assert (sample / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    # The wheel's passages with a few of its topics: the package at work, in a fraction of a whole run's time.
    given = tmp_path / "in"
    given.mkdir()
    (given / "passages.jsonl.gz").symlink_to(sample / "passages.jsonl.gz")
    write_topics(FEW_TOPICS, given / "topics.xml")
    # The session's work folder: the embeddings of the checkout's run are reused (they are keyed by text).
    result = subprocess.run([str(installed / "kueri"), "tira", "-i", str(given), "-o", str(tmp_path / "out"),
                             "--workdir", str(default_tira_run.workdir)], cwd=tmp_path, env=clean_env(),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "run.txt").read_text() == \
        lines_of_topics((default_tira_run.out / "run.txt").read_text(), FEW_TOPICS)
