"""One emulated AVX2-only CPU (Debian's qemu-user, ``qemu-x86_64 -cpu Haswell-v4``) for all the session's graphs.

A test module whose graph must compute the same bits on an emulated Haswell (AVX2, no AVX-512) as here defines
``emulated_case()``, the graph with its inputs and its output here; its test takes the session fixture
``emulated_haswell`` (tests/conftest.py) and finds its module's pair (here, emulated) in it. One emulated process
computes every selected module's graph: an emulated process spends seconds loading Python, numpy and onnxruntime
(about a thousand times slower than here) before it computes anything, once for all of them.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class EmulatedCase:
    """A graph, its inputs, the pooling of its output (a function of kueri.encoders.bert_graph: mean_pooled,
    first_token) and that pooled output computed here."""

    graph: bytes
    embeddings: np.ndarray
    mask: np.ndarray
    pooling: str
    native: np.ndarray


#: Runs each saved graph on its saved inputs: only onnxruntime's sessions run on the emulated CPU, the part whose
#: kernels depend on the CPU; the graphs and inputs are made here.
_EMULATED = """
import sys
from pathlib import Path
import numpy as np
from kueri.encoders import bert_graph
folder = Path(sys.argv[1])
out = {}
for name in sys.argv[2:]:
    inputs = np.load(folder / f"{name}.npz")
    session = bert_graph.open_session((folder / f"{name}.onnx").read_bytes(), 1)
    pooling = getattr(bert_graph, str(inputs["pooling"]))
    out[name] = pooling(session, inputs["embeddings"], inputs["mask"])
np.savez(folder / "emulated-partial.npz", **out)
(folder / "emulated-partial.npz").replace(folder / "emulated.npz")
"""


def on_emulated_haswell(modules: Iterable[str], folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each module's ``emulated_case()``: its output here and on an emulated Haswell, by module name."""
    cases = {name: importlib.import_module(name).emulated_case() for name in sorted(set(modules))}
    for name, case in cases.items():
        (folder / f"{name}.onnx").write_bytes(case.graph)
        np.savez(folder / f"{name}.npz", embeddings=case.embeddings, mask=case.mask, pooling=case.pooling)
    done = folder / "emulated.npz"
    ran = set()  # the modules another process of the session emulated already
    if done.exists():
        with np.load(done) as stored:
            ran = set(stored.files)
    if not set(cases) <= ran:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(["qemu-x86_64", "-cpu", "Haswell-v4", sys.executable, "-c", _EMULATED, str(folder), *cases],
                       check=True, env=env, capture_output=True, timeout=1800)
    emulated = np.load(done)
    return {name: (case.native, emulated[name]) for name, case in cases.items()}
