"""The bridge's setup errors: one clear line that says what to install (or which Java is too old), exit code 2."""

import os
import subprocess
import sys

import pytest

from kueri.errors import SetupError
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


def fake_java_home(tmp_path, version: str, release: bool = True):
    """A folder that looks like an old Java to kueri (a libjvm.so where Java 8 keeps it; a release file, or
    a bin/java that prints the version as Java 8 does): never started, only looked at."""
    home = tmp_path / f"java-{version}"
    (home / "jre" / "lib" / "amd64" / "server").mkdir(parents=True)
    (home / "jre" / "lib" / "amd64" / "server" / "libjvm.so").touch()
    (home / "bin").mkdir()
    if release:
        (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    else:
        java = home / "bin" / "java"
        java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2024-01-16\' >&2\n')
        java.chmod(0o755)
    return home


def test_an_old_java_home_is_one_line_before_the_jvm_starts(tmp_path):
    home = fake_java_home(tmp_path, "1.8.0")
    result = run_kueri({"JAVA_HOME": str(home)}, "-q", "tira", "-i", str(SAMPLE), "-o", str(tmp_path / "out"),
                       "--workdir", str(tmp_path / "w"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"kueri: error: Java 1.8.0 at {home} is too old: Lucene 9 needs Java 11 or later (kueri is tested on 17); "
        "install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"]
    assert not (tmp_path / "out" / "run.txt").exists()


def test_an_old_java_on_path_is_read_from_java_version(tmp_path):
    home = fake_java_home(tmp_path, "1.8.0_392", release=False)  # no release file: bin/java -version tells
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = f"{home / 'bin'}{os.pathsep}{env['PATH']}"
    result = subprocess.run([sys.executable, "-m", "kueri", "-q", "search", "--index", str(tmp_path / "i"), "--topics",
                             str(SAMPLE / "topics.xml"), "--output", str(tmp_path / "run.txt")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"kueri: error: Java 1.8.0_392 at {home} is too old: Lucene 9 needs Java 11 or later (kueri is tested on 17); "
        "install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"]


def test_java_versions_are_read_without_starting_java(tmp_path, caplog):
    from kueri.lucene.jvm import _major, check_java, find_java_home, java_version

    assert [_major(v) for v in ("1.8.0_392", "1.8.0", "11", "17.0.15", "21-ea", "21.0.1+12")] == [8, 8, 11, 17, 21, 21]
    real = java_version(find_java_home())
    assert real.major == 17 and real.supported and real.source.endswith("release")
    newer = fake_java_home(tmp_path, "21.0.2")
    assert check_java(newer).major == 21  # enough: a warning only, once
    check_java(newer)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [f"Java 21.0.2 at {newer}: kueri is tested on Java 17; runs should be the same but are not "
                        "checked on it"]
    older = fake_java_home(tmp_path, "10.0.2", release=False)
    assert java_version(older).source == f"{older / 'bin' / 'java'} -version"
    with pytest.raises(SetupError, match=r"^Java 10\.0\.2 at .* is too old: Lucene 9 needs Java 11 or later"):
        check_java(older)
