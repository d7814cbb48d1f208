"""A command that writes a shipped model says when OpenBLAS's kernel is not the one the file was fitted with
(kueri.train.blas; docs/reproducibility.md): with another kernel its bytes differ."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

NOTES = """
import numpy, scipy.linalg
from kueri.train.blas import kernel_note, openblas_kernels
print(sorted(openblas_kernels()))
print(kernel_note("stance-v2.npz"))
print(kernel_note("stance-v4.npz"))
print(kernel_note("unknown.npz"))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="OpenBLAS's x86-64 kernels")
def test_the_note_names_the_kernel_a_shipped_file_was_fitted_with():
    pytest.importorskip("threadpoolctl")
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}  # every x86-64 CPU the project runs on has it
    done = subprocess.run([sys.executable, "-c", NOTES], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    kernels, v2, v4, unknown = done.stdout.splitlines()
    assert kernels == "['Haswell']"
    assert v2 == "None" and unknown == "None"  # stance-v2 was fitted with Haswell's: nothing to say
    assert v4.startswith("note: OpenBLAS runs its Haswell kernel here; stance-v4.npz was fitted with SkylakeX's")
    assert "OPENBLAS_CORETYPE=SkylakeX writes them again" in v4
