"""The bridge's setup errors: one clear line that says what to install, exit code 2."""

import os
import subprocess
import sys

from tests.conftest import ROOT, SAMPLE


def run_kueri(env_changes, *args):
    env = {**os.environ, **env_changes}
    return subprocess.run([sys.executable, "-m", "kueri", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_missing_jar_is_exit_2_with_install_hint(tmp_path):
    result = run_kueri({"KUERI_JAR": str(tmp_path / "missing.jar")}, "tira", "-i", str(SAMPLE),
                       "-o", str(tmp_path / "out"), "--workdir", str(tmp_path / "w"))
    assert result.returncode == 2
    assert "KUERI_JAR" in result.stderr and "Traceback" not in result.stderr


def test_missing_java_is_exit_2_with_install_hint(tmp_path):
    result = run_kueri({"JAVA_HOME": str(tmp_path)}, "tira", "-i", str(SAMPLE), "-o", str(tmp_path / "out"),
                       "--workdir", str(tmp_path / "w"))
    assert result.returncode == 2
    assert "openjdk-17" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out" / "run.txt").exists()
