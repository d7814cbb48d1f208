"""The TIRA image, run as TIRA runs it: no network, the input mounted read-only, the output mounted.

The image is built by ``scripts/build_image.sh`` (``make image``) from this checkout; ``KUERI_IMAGE`` names
an image built already. It runs with ``docker run`` and through TIRA's own local client (``tira-run``, PyPI
``tira``, a test dependency) with the command docs/tira.md registers. Where Docker cannot run, every test
here is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    DATA,
    FEW_TOPICS,
    QRELS,
    ROOT,
    SAMPLE,
    SAMPLE_CORPUS,
    check_default_ndcg5,
    lines_of_topics,
    run_command,
    write_topics,
)
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


@pytest.fixture(scope="module")
def image_work(default_tira_run, tmp_path_factory) -> Path:
    """A work folder for the image's default run of the whole sample: the checkout's passage embeddings are handed
    over (they are the slow part, keyed by text; the cold run below shows the image embeds as the checkout does)."""
    work = shared_folder(tmp_path_factory.mktemp("image-work"))
    for cached in default_tira_run.workdir.glob("embeddings-*"):
        if cached.is_dir():
            shutil.copytree(cached, work / cached.name)
            for path in (work / cached.name, *(work / cached.name).iterdir()):
                path.chmod(0o777 if path.is_dir() else 0o666)
    return work


def registered_command() -> str:
    """The command docs/tira.md tells people to register in TIRA, as written there."""
    found = re.findall(r"Register the command `([^`]+)` in TIRA", (ROOT / "docs" / "tira.md").read_text())
    assert len(found) == 1, "docs/tira.md must name one command to register in TIRA"
    return found[0]


def tira_run(image: str, input_dir: Path, output_dir: Path, command: str, *options: str):
    """TIRA's local client (``tira-run``, as its documentation gives it to participants) on the image.

    It runs with no network where this user may make a network namespace (``unshare -n``), to show it
    needs none; its cache folder is kept out of the home folder.
    """
    client = Path(sys.executable).parent / "tira-run"
    if not client.is_file():
        pytest.skip(f"TIRA's client is not installed ({client}): pip install -e '.[test]'")
    args = [str(client), "--input-directory", str(input_dir), "--image", image, "--command", command,
            "--output-directory", str(output_dir), "--fail-if-output-is-empty", *options]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        args = ["unshare", "-n", *args]
    cache = output_dir.parent / "tira-cache"
    return run_command(args, cwd=output_dir.parent, env={"TIRA_CACHE_DIR": str(cache)}, timeout=1200)


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
    """The Java helper ships compiled in the wheel (the image has no javac): Lucene runs on Java threads."""
    probe = "from kueri.lucene.jvm import has_java_helper; print(has_java_helper())"
    result = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python", "-c", probe],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_the_default_run_in_the_image_is_the_checkouts(image, image_work, default_tira_run, tmp_path):
    # The passage embeddings are the checkout's (image_work); the index, the query embeddings, the second
    # stage and the stance labels are all computed in the image.
    out = shared_folder(tmp_path / "out")
    result = run_image(image, SAMPLE, out, work=image_work)
    assert result.returncode == 0, result.stderr
    per_topic = check_touche_run(out / "run.txt", {line.split()[0] for line in (out / "run.txt").open()})
    assert len(per_topic) == 50
    assert "wrote 9145 lines for 50 topics to /output/run.txt" in result.stderr
    assert (out / "run.txt").read_bytes() == (default_tira_run.out / "run.txt").read_bytes()
    scores = run_command([sys.executable, "-m", "kueri", "evaluate", str(out / "run.txt"), "--qrels", str(QRELS),
                          "--json"])
    check_default_ndcg5(json.loads(scores.stdout)["nDCG@5"])


def test_tira_run_with_the_registered_command_cold_writes_the_checkouts_run(image, default_tira_run, tmp_path):
    """TIRA's client, with docs/tira.md's command as written, nothing cached (as on TIRA: the image makes its index and
    embeds every passage it needs itself, in its own work folder): the checkout's run, byte for byte.

    On a few of the sample's topics (a run is made topic by topic: their lines of the checkout's default run are
    theirs), which keeps the cold run short; the whole sample's run in the image is the test above.
    """
    small = tmp_path / "in"
    small.mkdir()
    write_topics(FEW_TOPICS, small / "topics.xml")
    shutil.copy(SAMPLE_CORPUS, small / "passages.jsonl.gz")
    expected = lines_of_topics((default_tira_run.out / "run.txt").read_text(), FEW_TOPICS)
    command = registered_command()
    out = shared_folder(tmp_path / "out")
    result = tira_run(image, small, out, command)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"# command={command}" in result.stdout  # the client ran the command as registered
    lines = len(expected.splitlines())
    assert f"wrote {lines} lines for {len(FEW_TOPICS)} topics to /tira-data/output/run.txt" in result.stdout
    assert (out / "run.txt").read_bytes() == expected.encode()
    # besides the run, at most the client's own record of it (its tracker's)
    assert set(os.listdir(out)) <= {"run.txt", ".tracking-results.yml"}


def test_a_corrupt_input_fails_in_the_image_and_writes_no_run(image, tmp_path):
    folder = corrupt_input(tmp_path)
    out = shared_folder(tmp_path / "out")
    result = run_image(image, folder, out)
    assert result.returncode == 1
    assert "passages.jsonl.gz:1500: malformed JSON" in result.stderr and "Traceback" not in result.stderr
    assert not (out / "run.txt").exists()


def test_a_corrupt_input_fails_cleanly_through_tira_run(image, tmp_path):
    """One line naming the file and line, no traceback, no run.txt.

    tira-run 0.0.207 does not pass the software's exit status on (its own TODO) and its tracker writes
    ``.tracking-results.yml`` even then, so the client exits 0: the failure shows in what it prints and in
    the missing run.txt (docs/tira.md says so).
    """
    folder = corrupt_input(tmp_path)
    out = shared_folder(tmp_path / "out")
    result = tira_run(image, folder, out, registered_command())
    assert "kueri: error: /tira-data/input/passages.jsonl.gz:1500: malformed JSON" in result.stdout
    assert "Traceback" not in result.stdout
    assert not (out / "run.txt").exists()
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_image_reads_tiras_environment_variables(image, tmp_path):
    """No -i / -o: TIRA_INPUT_DATASET and TIRA_OUTPUT_DIR say where (a corrupt input: it fails at once)."""
    folder = corrupt_input(tmp_path)
    out = shared_folder(tmp_path / "out")
    result = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{folder}:/data/in:ro", "-v",
                             f"{out}:/data/out", "-e", "TIRA_INPUT_DATASET=/data/in", "-e",
                             "TIRA_OUTPUT_DIR=/data/out", image, "my-software.sh"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "kueri: error: /data/in/passages.jsonl.gz:1500: malformed JSON" in result.stderr
    assert not (out / "run.txt").exists()


@pytest.mark.parametrize("kind", ["tira-full-rank", "tira-re-rank"])
def test_tira_run_on_tiras_own_inputs_writes_the_checkouts_run(kind, image, workdir, tmp_path):
    """TIRA's full-rank and re-rank inputs (small fixtures made by TIRA's loader's rules), through TIRA's client with
    the registered command, cold in the image: the checkout's run for the same input, byte for byte."""
    fixture = DATA / kind
    checkout = run_command([str(ROOT / "my-software.sh"), "-i", str(fixture), "-o", str(tmp_path / "checkout"), "-w",
                            str(workdir)])
    assert checkout.returncode == 0, checkout.stderr
    out = shared_folder(tmp_path / "out")
    result = tira_run(image, fixture, out, registered_command())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"kueri: TIRA's {kind.removeprefix('tira-')} input" in result.stdout
    assert (out / "run.txt").read_bytes() == (tmp_path / "checkout" / "run.txt").read_bytes()
