"""Which computations give the same bits on other CPUs: onnxruntime's operators, numpy's, and kueri's encoders.

    .venv/bin/python scripts/compare_kernels.py                          # ops on Haswell-v4 and EPYC-Rome
    .venv/bin/python scripts/compare_kernels.py --cpus Haswell-v4 SandyBridge Nehalem --encoders 8

Each case runs natively and, under Debian's qemu-user (``qemu-x86_64 -cpu MODEL``), on an emulated CPU
(``qemu-x86_64 -cpu help`` lists the models; qemu 7.2 emulates up to AVX2, no AVX-512). Libraries read
the CPU's features when they load and pick their kernels from them, so the emulated process takes the
AVX2 (or older) paths while this machine takes its own. The table gives, per case and CPU, ``=`` where
the result is the same to the bit, else the largest absolute difference. ``--encoders N`` also runs
both encoders' graphs (made here, with kueri's weights and N shipped passages' inputs) on each CPU. An
emulated CPU is slow (minutes for a few passages): keep N small. docs/reproducibility.md has the results.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kueri.cli.script import script_parser

#: onnxruntime operators and numpy functions on fixed random inputs shaped like the encoders' tensors.
CASES = r'''
import sys
import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
F = TensorProto.FLOAT


def model(nodes, inputs, initialisers=(), output=F):
    graph = helper.make_graph(nodes, "case", [helper.make_tensor_value_info(n, t, list(a.shape)) for n, t, a in inputs],
                              [helper.make_tensor_value_info("y", output, None)], list(initialisers))
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)]
    made = helper.make_model(graph, opset_imports=opsets)
    made.ir_version = 9
    return made.SerializeToString(), {n: a for n, _, a in inputs}


def unary(op, x, **attributes):
    return model([helper.make_node(op, ["x"], ["y"], **attributes)], [("x", F, x)])


def constant(name, value):
    return numpy_helper.from_array(value, name)


scores = (rng.standard_normal((2, 12, 64, 64)) * 3).astype(np.float32)
hidden = (rng.standard_normal((2, 64, 384)) * 2).astype(np.float32)
wide = (rng.standard_normal((2, 64, 1536)) * 2).astype(np.float32)
axis = constant("axis", np.array([-1], np.int64))
onnx_cases = {
    "Softmax": unary("Softmax", scores, axis=-1),
    "Exp": unary("Exp", scores - 8),
    "Erf": unary("Erf", hidden),
    "Gelu": unary("Gelu", wide),
    "ReduceSum": model([helper.make_node("ReduceSum", ["x", "axis"], ["y"])], [("x", F, hidden)], [axis]),
    "ReduceMax": model([helper.make_node("ReduceMax", ["x", "axis"], ["y"])], [("x", F, hidden)], [axis]),
    "LayerNormalization": model(
        [helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=-1, epsilon=1e-12)], [("x", F, hidden)],
        [constant("w", rng.standard_normal(384).astype(np.float32)),
         constant("b", rng.standard_normal(384).astype(np.float32))]),
    "MatMul attention (K=32)": model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                                     [("a", F, rng.standard_normal((2, 12, 64, 32)).astype(np.float32)),
                                      ("b", F, rng.standard_normal((2, 12, 32, 64)).astype(np.float32))]),
    "MatMul linear (K=1536)": model([helper.make_node("MatMul", ["a", "w"], ["y"])], [("a", F, wide)],
                                    [constant("w", (rng.standard_normal((1536, 384)) * 0.05).astype(np.float32))]),
}
packed = rng.integers(0, 256, (384, 3, 128)).astype(np.uint8)
block_scales = (rng.random((384, 3)) * 0.01).astype(np.float32)
for level in (1, 4):
    onnx_cases[f"MatMulNBits 8 bits, accuracy level {level}"] = model(
        [helper.make_node("MatMulNBits", ["a", "B", "s"], ["y"], domain="com.microsoft", K=384, N=384, bits=8,
                          block_size=128, accuracy_level=level)],
        [("a", F, hidden)], [constant("B", packed), constant("s", block_scales)])
for name, a_type, b_type, a_range, b_range, a_dtype, b_dtype in (
        ("uint8 x uint8", TensorProto.UINT8, TensorProto.UINT8, (0, 256), (0, 256), np.uint8, np.uint8),
        ("uint8 x int8", TensorProto.UINT8, TensorProto.INT8, (0, 256), (-128, 128), np.uint8, np.int8)):
    onnx_cases[f"MatMulInteger {name}"] = model(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        [("a", a_type, rng.integers(*a_range, (2, 64, 384)).astype(a_dtype))],
        [constant("b", rng.integers(*b_range, (384, 384)).astype(b_dtype))], TensorProto.INT32)

out = {}
for name, (serialised, feeds) in onnx_cases.items():
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(serialised, options, providers=["CPUExecutionProvider"])
    out["onnxruntime " + name] = session.run(None, feeds)[0]
vectors = rng.standard_normal((300, 384)).astype(np.float32)
query = rng.standard_normal(384).astype(np.float32)
rows = rng.standard_normal((300, 30))
out["numpy matrix @ matrix (BLAS)"] = vectors @ vectors[:50].T
out["numpy matrix @ vector (BLAS)"] = vectors @ query
out["numpy (matrix * vector).sum(axis=1)"] = (vectors * query).sum(axis=1)
out["numpy float64 (matrix * vector).sum(axis=1)"] = (rows * rows[0]).sum(axis=1)
out["numpy log"] = np.log(np.abs(rows) + 1e-3)
out["numpy exp"] = np.exp(rows)
out["math.log"] = np.array([__import__("math").log(abs(v) + 1e-3) for v in rows.ravel()])
np.savez(sys.argv[1], **out)
'''

#: Runs the saved encoder graphs on the saved inputs (the part whose kernels depend on the CPU).
ENCODERS = r'''
import sys
from pathlib import Path
import numpy as np
from kueri.encoders.bert_graph import mean_pooled, open_session
folder = Path(sys.argv[1])
inputs = np.load(folder / "inputs.npz")
out = {}
for name in ("minilm", "e5"):
    session = open_session((folder / f"{name}.onnx").read_bytes(), 1)
    out["encoder " + name] = mean_pooled(session, inputs[name + "_embeddings"], inputs[name + "_mask"])
np.savez(sys.argv[2], **out)
'''


def encoder_inputs(folder: Path, count: int) -> None:
    """Both encoders' graphs and the input embeddings of the sample's first ``count`` passages, saved."""
    from kueri import resources
    from kueri.encoders.bert_graph import build_graph
    from kueri.encoders.e5 import PASSAGE_PREFIX, E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder
    from kueri.parse import PassageReader

    passages = PassageReader(resources.sample() / "passages.jsonl.gz")
    texts = [p.contents for _, p in zip(range(count), passages, strict=False)]
    minilm, e5 = MiniLMEncoder(threads=1), E5Encoder(threads=1)
    (folder / "minilm.onnx").write_bytes(build_graph(minilm.weights.encoder))
    (folder / "e5.onnx").write_bytes(build_graph(e5.weights.encoder()))
    arrays = {}
    for name, encoded, pad, embed in (
            ("minilm", [minilm.tokenizer.encode(t) for t in texts], 0, minilm.weights.embeddings),
            ("e5", [e5.tokens(PASSAGE_PREFIX + t) for t in texts], e5.weights.pad, e5.weights.input_embeddings)):
        ids = np.full((len(encoded), max(map(len, encoded))), pad, dtype=np.int64)
        mask = np.zeros(ids.shape, dtype=bool)
        for row, pieces in enumerate(encoded):
            ids[row, : len(pieces)], mask[row, : len(pieces)] = pieces, True
        arrays[f"{name}_embeddings"], arrays[f"{name}_mask"] = embed(ids), mask
    np.savez(folder / "inputs.npz", **arrays)


def run(cpu: str | None, code: str, *args: str) -> None:
    command = [sys.executable, "-c", code, *args]
    if cpu is not None:
        command = ["qemu-x86_64", "-cpu", cpu, *command]
    subprocess.run(command, check=True, stderr=subprocess.DEVNULL)


def difference(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape == b.shape and a.tobytes() == b.tobytes():
        return "="
    return f"{np.abs(a.astype(np.float64) - b.astype(np.float64)).max():.1e}"


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--cpus", nargs="+", default=["Haswell-v4", "EPYC-Rome"], help="qemu CPU models")
    parser.add_argument("--encoders", type=int, default=0, metavar="N", help="also the encoders on N passages")
    parser.add_argument("--no-ops", action="store_true", help="only the encoders")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        results: dict[str, dict[str, np.ndarray]] = {}
        for cpu in [None, *args.cpus]:
            label = cpu or "native"
            merged: dict[str, np.ndarray] = {}
            if not args.no_ops:
                run(cpu, CASES, str(folder / f"ops-{label}.npz"))
                merged.update(np.load(folder / f"ops-{label}.npz"))
            if args.encoders:
                if cpu is None:
                    encoder_inputs(folder, args.encoders)
                run(cpu, ENCODERS, str(folder), str(folder / f"encoders-{label}.npz"))
                merged.update(np.load(folder / f"encoders-{label}.npz"))
            results[label] = merged
    native = results.pop("native")
    print("| computation | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for name, value in native.items():
        print(f"| {name} | " + " | ".join(difference(value, other[name]) for other in results.values()) + " |")
    return 0

