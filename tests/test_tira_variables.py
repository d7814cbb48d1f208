"""TIRA's environment variables: without -i / -o, ``my-software.sh`` and ``kueri tira`` read
TIRA_INPUT_DATASET and TIRA_OUTPUT_DIR (TIRA and its local client set both); -i / -o win over them.

A missing input folder fails at once, naming the folder it was given: that shows which one was used
without a whole run (the image runs the same script on TIRA's variables in tests/test_image.py).
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT, run_command

ENTRY_POINTS = {
    "my-software.sh": [str(ROOT / "my-software.sh")],
    "kueri tira": [sys.executable, "-m", "kueri", "tira"],
}


@pytest.fixture(params=sorted(ENTRY_POINTS))
def entry(request) -> list[str]:
    return ENTRY_POINTS[request.param]


def test_tiras_variables_stand_for_missing_flags(entry, tmp_path):
    given = tmp_path / "tira-input"
    out = tmp_path / "tira-output"
    result = run_command(entry, env={"TIRA_INPUT_DATASET": str(given), "TIRA_OUTPUT_DIR": str(out)})
    assert result.returncode == 1, result.stderr
    assert f"kueri: error: {given}: input folder not found" in result.stderr
    assert out.is_dir()  # the output folder is checked (and made) before any work: it was TIRA_OUTPUT_DIR


def test_flags_win_over_tiras_variables(entry, tmp_path):
    env = {"TIRA_INPUT_DATASET": str(tmp_path / "tira-input"), "TIRA_OUTPUT_DIR": str(tmp_path / "tira-output")}
    flagged = tmp_path / "flag-input"
    result = run_command([*entry, "-i", str(flagged), "-o", str(tmp_path / "flag-output")], env=env)
    assert result.returncode == 1, result.stderr
    assert f"kueri: error: {flagged}: input folder not found" in result.stderr
    assert (tmp_path / "flag-output").is_dir() and not (tmp_path / "tira-output").exists()


def test_without_flags_or_variables_it_is_a_usage_error(entry, tmp_path):
    result = run_command(entry, env={"TIRA_INPUT_DATASET": "", "TIRA_OUTPUT_DIR": ""}, cwd=tmp_path)
    assert result.returncode == 2
    assert "usage" in result.stderr
    helped = run_command([*entry, "-h"])  # and the help says where -i / -o come from otherwise
    assert "TIRA_INPUT_DATASET" in helped.stdout + helped.stderr and "TIRA_OUTPUT_DIR" in helped.stdout + helped.stderr
