"""The TIRA image, run as TIRA runs it: no network, the input mounted read-only, the output mounted.

The image is built by ``scripts/build_image.sh`` (``make image``) from this checkout; ``KUERI_IMAGE`` names
an image built already. Where Docker cannot run, every test here is skipped with the reason.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import QRELS, ROOT, SAMPLE, SAMPLE_CORPUS, SAMPLE_TOPICS, check_default_ndcg5, run_command
from tests.test_end_to_end import check_touche_run, corrupt_input

pytestmark = [pytest.mark.slow, pytest.mark.image]


@pytest.fixture(scope="module")
def image() -> str:
    why = os.environ.get("KUERI_NO_DOCKER")
    if why:
        pytest.skip(f"Docker cannot run here: {why}")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if info.returncode != 0:
        pytest.skip(f"Docker cannot run here: `docker info` failed ({(info.stderr or info.stdout).strip()[-200:]})")
    tag = os.environ.get("KUERI_IMAGE")
    if not tag:
        tag = "kueri:latest"
        built = run_command([str(ROOT / "scripts" / "build_image.sh")], env={"PYTHON": sys.executable, "TAG": tag},
                            timeout=1800)
        assert built.returncode == 0, built.stdout + built.stderr
    return tag


def shared_folder(path: Path) -> Path:
    """A folder the image's non-root user may write in."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def run_image(image: str, input_dir: Path, output_dir: Path, *args: str, work: Path | None = None):
    command = ["docker", "run", "--rm", "--network", "none", "-v", f"{input_dir}:/input:ro", "-v",
               f"{output_dir}:/output"]
    if work is not None:
        command += ["-v", f"{work}:/work"]
        args = (*args, "-w", "/work")
    return subprocess.run([*command, image, "my-software.sh", "-i", "/input", "-o", "/output", *args],
                          capture_output=True, text=True, timeout=1200)


def test_the_image_runs_as_a_user_with_my_software_on_its_path(image):
    result = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "sh", "-c",
                             "id -u && command -v my-software.sh"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1000", "/usr/local/bin/my-software.sh"]


def test_the_image_indexes_on_java_threads(image):
    """The Java helper compiled on the host is found (the image has no javac): Lucene runs on Java threads."""
    probe = "from kueri.lucene.jvm import has_java_helper; print(has_java_helper())"
    result = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python", "-c", probe],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_the_default_run_in_the_image_is_the_checkouts(image, default_tira_run, tmp_path):
    # The checkout's passage embeddings are handed over (they are the slow part, keyed by text); the
    # index, the query embeddings, the second stage and the stance labels are all computed in the image.
    work = shared_folder(tmp_path / "work")
    for cached in default_tira_run.workdir.glob("embeddings-*.npz"):
        shutil.copy(cached, work / cached.name)
        (work / cached.name).chmod(0o666)
    out = shared_folder(tmp_path / "out")
    result = run_image(image, SAMPLE, out, work=work)
    assert result.returncode == 0, result.stderr
    per_topic = check_touche_run(out / "run.txt", {line.split()[0] for line in (out / "run.txt").open()})
    assert len(per_topic) == 50
    assert (out / "run.txt").read_bytes() == (default_tira_run.out / "run.txt").read_bytes()
    scores = run_command([sys.executable, "-m", "kueri", "evaluate", str(out / "run.txt"), "--qrels", str(QRELS),
                          "--json"])
    check_default_ndcg5(json.loads(scores.stdout)["nDCG@5"])


def test_a_cold_run_in_the_image_equals_the_checkouts(image, tmp_path):
    """Nothing cached, as on TIRA: the image embeds every passage itself (a small input keeps it short)."""
    small = tmp_path / "in"
    small.mkdir()
    shutil.copy(SAMPLE_TOPICS, small / "topics.xml")
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as source, \
            gzip.open(small / "passages.jsonl.gz", "wt", encoding="utf-8") as target:
        target.writelines(itertools.islice(source, 120))
    out = shared_folder(tmp_path / "out")
    result = run_image(image, small, out)
    assert result.returncode == 0, result.stderr
    checkout = run_command([str(ROOT / "my-software.sh"), "-i", str(small), "-o", str(tmp_path / "checkout"), "-w",
                            str(tmp_path / "checkout-work")])
    assert checkout.returncode == 0, checkout.stderr
    assert (out / "run.txt").read_bytes() == (tmp_path / "checkout" / "run.txt").read_bytes()


def test_a_corrupt_input_fails_in_the_image_and_writes_no_run(image, tmp_path):
    folder = corrupt_input(tmp_path)
    out = shared_folder(tmp_path / "out")
    result = run_image(image, folder, out)
    assert result.returncode == 1
    assert "passages.jsonl.gz:1500: malformed JSON" in result.stderr and "Traceback" not in result.stderr
    assert not (out / "run.txt").exists()
