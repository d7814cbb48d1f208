#!/usr/bin/env python3
"""JAX or PyTorch for training kueri's stance encoder: epoch time, compilation, peak RSS, import time, install size.

    .venv/bin/python benchmarks/bench_training.py [--repeat 2] [--epochs 2] [--torch-threads 2[,1]] [--data PATH.npz]

The training compared is ``scripts/train_stance_encoder.py``'s: MiniLM's top 2 layers and a linear head on the
first token, AdamW, batch 32, on CompSent-19 with the hypothesis segment. The batches are computed once by the
script's own code (``examples``, ``encode_inputs``, ``lower_states``: the lower layers by onnxruntime,
``batches_of``) and saved with the script's ``initial_parameters`` to an .npz outside the repository
(``--data``: kept there and reused when it exists; otherwise a temporary folder, removed at the end).

Each framework then trains ``--epochs`` epochs over those batches in a fresh process of its own: JAX with the
script's ``forward`` and its AdamW step (same code, ``jax.jit``) in ``.venv/bin/python``; PyTorch with the same
computation written as plain tensor ops (float32, ``torch.set_num_threads(2)``, ``torch.optim.AdamW`` with the
script's hyper-parameters, weight decay on matrices only, the same warm-up/linear-decay schedule and batch
order) in ``/tmp/venv-torch/bin/python``, a process that imports only torch and numpy (and the standard
library). The runs alternate (JAX, torch, JAX, torch, ... ``--repeat`` times). Printed per framework: the first
epoch (JAX: includes compiling each batch shape), a later epoch, wall and CPU seconds, the child's peak RSS,
``import`` time in a fresh interpreter, the mean training loss of each epoch (a sanity check: the two are not
bit-equal), and the install size. The machine's load (1-minute load average) is printed beside every run.

``--torch-threads 2,1`` also runs PyTorch with 1 thread (each count is a run of its own, in the alternation): on
a loaded machine, 2 OpenMP threads can spin while waiting for each other. ``--batches N`` trains on N of the
batches only: a quick test of the script, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

ROOT = Path(__file__).resolve().parents[1]
JAX_PYTHON = ROOT / ".venv" / "bin" / "python"
TORCH_VENV = Path("/tmp/venv-torch")
TORCH_PYTHON = TORCH_VENV / "bin" / "python"
SITE_PACKAGES = ROOT / ".venv" / "lib" / "python3.11" / "site-packages"
JAX_PACKAGES = ("jax", "jaxlib", "ml_dtypes", "opt_einsum")
LAYERS = 2  # the script's default --layers
FRAMEWORKS = ("jax", "torch")
IMPORTS = {"jax": "import jax, jax.numpy", "torch": "import torch"}
PYTHONS = {"jax": JAX_PYTHON, "torch": TORCH_PYTHON}
# Measured by the lead with pip on this machine, pip's cache cold (not measured by this script).
KNOWN_INSTALLS = {
    "torch": "torch 2.14.1: 88 s for 5,459 MB incl. CUDA libraries (nvidia-* 3,209 MB, triton 897 MB, torch 1,182 MB)",
    "jax": "jax[cpu] 0.10.2: 21 s for a 623 MB venv incl. scipy/numpy",
}

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]


def load() -> float:
    return os.getloadavg()[0]


def cpu_name() -> str:
    """The CPU's model name and whether it has AVX2, FMA and AVX-512 (from /proc/cpuinfo)."""
    name, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    has = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in ("avx2", "fma", "avx512f"))
    return f"{name} ({has}), {os.cpu_count()} logical cores"


# -- the data: the script's own code, once ---------------------------------------------------------------------


def prepare(path: Path) -> None:
    """The script's batches and initial parameters, saved to ``path`` with its hyper-parameters."""
    from kueri.encoders.cross import DEFAULT_MAX_TOKENS, base_weights, encode_pairs, pair_tokenizer
    from kueri.stance.encoders import HYPOTHESIS
    from kueri.train.data import load_compsent
    from kueri.train.stance import encoder as script
    from kueri.train.stance.bert_jax import WARMUP, WEIGHT_DECAY, lower_states

    started = time.perf_counter()
    encoder = base_weights().encoder
    first_layer = len(encoder.layers) - LAYERS
    texts, labels = script.examples(load_compsent())
    encoded = encode_pairs(pair_tokenizer(DEFAULT_MAX_TOKENS), [(HYPOTHESIS, text) for text in texts])
    batches = script.batches_of(lower_states(encoded, first_layer), labels)
    params = script.initial_parameters(first_layer, np.random.default_rng(script.SEED))
    arrays = {f"p/{name}": np.asarray(value, dtype=np.float32) for name, value in flatten(params)}
    for index, (x, bias, y) in enumerate(batches):
        arrays[f"x/{index}"], arrays[f"bias/{index}"], arrays[f"y/{index}"] = x, bias, y
    meta = {"heads": encoder.heads, "eps": float(encoder.eps), "batches": len(batches), "examples": len(labels),
            "seed": script.SEED, "learning_rate": script.LEARNING_RATE, "warmup": WARMUP,
            "weight_decay": WEIGHT_DECAY, "batch": script.BATCH, "first_layer": first_layer}
    arrays["meta"] = np.array(json.dumps(meta))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    print(f"data: {len(labels)} examples in {len(batches)} batches (lower {first_layer} layers by onnxruntime) "
          f"in {time.perf_counter() - started:.0f} s [load {load():.2f}], {path.stat().st_size / 2**20:.0f} MB "
          f"at {path}", flush=True)


def flatten(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(tree, dict):
        return [item for key in tree for item in flatten(tree[key], f"{prefix}{key}/")]
    if isinstance(tree, list):
        return [item for index, value in enumerate(tree) for item in flatten(value, f"{prefix}{index}/")]
    return [(prefix.rstrip("/"), tree)]


def read_data(path: Path, limit: int | None) -> tuple[dict, dict, list[Batch]]:
    """The hyper-parameters, the initial parameters (nested as the script's) and the batches of ``path``."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        params: dict = {"layers": [{} for _ in range(LAYERS)], "head": {}}
        for key in data.files:
            if key.startswith("p/"):
                parts = key.split("/")[1:]
                node = params["head"] if parts[0] == "head" else params["layers"][int(parts[1])]
                for part in parts[(1 if parts[0] == "head" else 2):-1]:
                    node = node.setdefault(part, {})
                node[parts[-1]] = data[key]
        batches = [(data[f"x/{i}"], data[f"bias/{i}"], data[f"y/{i}"]) for i in range(meta["batches"])]
    if limit:
        batches = batches[::max(1, len(batches) // limit)][:limit]
    return meta, params, batches


def rate_at(meta: dict, t: float, steps: int, warm: int) -> float:
    """The script's learning rate at step ``t`` (1, 2, ...): linear warm-up, then linear decay to 0."""
    return meta["learning_rate"] * min(t / warm, (steps - t) / (steps - warm))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the children: one epoch loop per framework ----------------------------------------------------------------


def epochs_of(batches: list[Batch], meta: dict, epochs: int, examples: int,
              step: Callable[[int, int], float]) -> dict:
    """Run ``step(t, batch index)`` over ``batches`` in the script's order, ``epochs`` times: the seconds
    and mean loss of each epoch."""
    wall, cpu, losses, t = [], [], [], 0
    for epoch in range(epochs):
        started, cpu_started = time.perf_counter(), time.process_time()
        total = 0.0
        for index in np.random.default_rng(meta["seed"] + 1 + epoch).permutation(len(batches)):
            t += 1
            total += step(t, int(index)) * len(batches[index][2])
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        losses.append(total / examples)
        print(f"    epoch {epoch + 1}: {wall[-1]:.1f} s, loss {losses[-1]:.4f} [load {load():.2f}]",
              file=sys.stderr, flush=True)
    return {"wall": wall, "cpu": cpu, "loss": losses}


def jax_child(data: Path, epochs: int, limit: int | None) -> dict:
    """The script's ``forward`` and AdamW step (copied from ``train``), jitted, over the saved batches."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    from kueri.train.stance.bert_jax import forward

    meta, host, batches = read_data(data, limit)
    examples = sum(len(y) for *_, y in batches)
    params = jax.tree_util.tree_map(jnp.asarray, host)
    heads, eps, learning_rate, weight_decay = meta["heads"], meta["eps"], meta["learning_rate"], meta["weight_decay"]
    steps = epochs * len(batches)
    warm = max(1, int(meta["warmup"] * steps))
    rss_before = peak_rss_mb()

    def loss(p: Any, x: Any, bias: Any, y: Any) -> Any:  # as the script's
        logits = forward(p, x, bias, heads, eps)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])

    @jax.jit
    def step(p: Any, m: Any, v: Any, t: Any, x: Any, bias: Any, y: Any) -> Any:  # as the script's
        value, grads = jax.value_and_grad(loss)(p, x, bias, y)
        rate = learning_rate * jnp.minimum(t / warm, (steps - t) / (steps - warm))
        m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
        correction = jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)

        def update(w: Any, a: Any, b: Any) -> Any:  # AdamW: decoupled weight decay on matrices only
            decay = weight_decay * w if w.ndim == 2 else 0.0
            return w - rate * (correction * a / (jnp.sqrt(b) + 1e-8) + decay)

        return jax.tree_util.tree_map(update, p, m, v), m, v, value

    state = {"p": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
             "v": jax.tree_util.tree_map(jnp.zeros_like, params)}

    def one(t: int, index: int) -> float:
        x, bias, y = batches[index]
        state["p"], state["m"], state["v"], value = step(state["p"], state["m"], state["v"], jnp.float32(t), x, bias, y)
        return float(value)

    result = epochs_of(batches, meta, epochs, examples, one)
    return {**result, "version": f"jax {jax.__version__}, jaxlib {jax.lib.__version__}",
            "shapes": len({b[0].shape for b in batches}), "rss_before": rss_before, "rss": peak_rss_mb()}


def torch_forward(params: dict, x: torch.Tensor, bias: torch.Tensor, heads: int, eps: float) -> torch.Tensor:
    """The script's ``forward`` as torch tensor ops: post-layer-norm BERT layers, exact GELU, head on token 0."""
    import torch

    def norm(h: torch.Tensor, p: dict) -> torch.Tensor:
        mean = h.mean(-1, keepdim=True)
        var = ((h - mean) ** 2).mean(-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + eps) * p["w"] + p["b"]

    batch, tokens, hidden = x.shape
    size = hidden // heads

    def split(y: torch.Tensor) -> torch.Tensor:
        return y.reshape(batch, tokens, heads, size).transpose(1, 2)

    for p in params["layers"]:
        q, k, v = (split(x @ p[n]["w"] + p[n]["b"]) for n in "qkv")
        scores = q @ k.transpose(2, 3) / math.sqrt(size) + bias
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, tokens, hidden)
        x = norm(x + context @ p["ao"]["w"] + p["ao"]["b"], p["aln"])
        middle = torch.nn.functional.gelu(x @ p["fi"]["w"] + p["fi"]["b"], approximate="none")
        x = norm(x + middle @ p["fo"]["w"] + p["fo"]["b"], p["oln"])
    return x[:, 0, :] @ params["head"]["w"] + params["head"]["b"]


def torch_child(data: Path, epochs: int, limit: int | None, threads: int = 2) -> dict:
    """The same training in PyTorch: torch.optim.AdamW, the script's schedule set on each step."""
    import torch

    torch.set_num_threads(threads)
    meta, host, batches = read_data(data, limit)
    examples = sum(len(y) for *_, y in batches)
    leaves: list[torch.Tensor] = []

    def tensors(tree: Any) -> Any:
        if isinstance(tree, dict):
            return {key: tensors(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [tensors(value) for value in tree]
        leaves.append(torch.tensor(tree, dtype=torch.float32, requires_grad=True))
        return leaves[-1]

    params = tensors(host)
    groups = [{"params": [w for w in leaves if w.ndim == 2], "weight_decay": meta["weight_decay"]},
              {"params": [w for w in leaves if w.ndim != 2], "weight_decay": 0.0}]
    optimiser = torch.optim.AdamW(groups, lr=meta["learning_rate"], betas=(0.9, 0.999), eps=1e-8)
    on_device = [(torch.from_numpy(x), torch.from_numpy(bias), torch.from_numpy(y).long()) for x, bias, y in batches]
    steps = epochs * len(batches)
    warm = max(1, int(meta["warmup"] * steps))
    rss_before = peak_rss_mb()

    def one(t: int, index: int) -> float:
        x, bias, y = on_device[index]
        for group in optimiser.param_groups:
            group["lr"] = rate_at(meta, t, steps, warm)
        optimiser.zero_grad(set_to_none=True)
        logits = torch_forward(params, x, bias, meta["heads"], meta["eps"])
        value = -torch.log_softmax(logits, dim=-1)[torch.arange(len(y)), y].mean()
        value.backward()
        optimiser.step()
        return float(value.item())

    result = epochs_of(batches, meta, epochs, examples, one)
    return {**result, "version": f"torch {torch.__version__}, {torch.get_num_threads()} threads",
            "shapes": len({b[0].shape for b in batches}), "rss_before": rss_before, "rss": peak_rss_mb()}


# -- the parent ------------------------------------------------------------------------------------------------


def run_child(framework: str, threads: int, data: Path, epochs: int, limit: int | None) -> dict:
    command = [str(PYTHONS[framework]), str(Path(__file__).resolve()), "--child", framework, "--data", str(data),
               "--epochs", str(epochs), "--threads", str(threads)] + (["--batches", str(limit)] if limit else [])
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    before, started = load(), time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{framework} child failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "load": (before, load()), "process": time.perf_counter() - started}


def import_seconds(framework: str) -> float:
    code = f"import time; s = time.perf_counter(); {IMPORTS[framework]}; print(time.perf_counter() - s)"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([str(PYTHONS[framework]), "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip())


def du_mb(paths: list[Path]) -> int:
    done = subprocess.run(["du", "-smc", *map(str, paths)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[-1].split()[0])


def spread(values: list[float], digits: int = 1) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs per framework (%(default)s)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run, at least 2 (%(default)s)")
    parser.add_argument("--data", type=Path, help="the batches' .npz: reused if it exists (default: a temp folder)")
    parser.add_argument("--batches", type=int, help="train on this many batches only (testing the script)")
    parser.add_argument("--torch-threads", default="2", help="torch.set_num_threads of each torch run (%(default)s)")
    parser.add_argument("--child", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "jax":
            result = jax_child(args.data, args.epochs, args.batches)
        else:
            result = torch_child(args.data, args.epochs, args.batches, args.threads)
        print(json.dumps(result))
        return 0
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first epoch includes compilation)")

    counts = [int(n) for n in args.torch_threads.split(",")]
    variants = {"jax": ("jax", 0)} | {f"torch ({n} thread{'s' * (n != 1)})": ("torch", n) for n in counts}
    print(f"CPU: {cpu_name()}; load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    scratch = None
    if args.data is None:
        scratch = Path(tempfile.mkdtemp(prefix="kueri-bench-training-"))
        args.data = scratch / "batches.npz"
    try:
        if args.data.exists():
            print(f"data: reusing {args.data}")
        else:
            prepare(args.data)
        if args.batches:
            print(f"--batches {args.batches}: NOT whole epochs, a test of the script only")
        runs: dict[str, list[dict]] = {name: [] for name in variants}
        imports: dict[str, list[tuple[float, float]]] = {name: [] for name in FRAMEWORKS}
        for repetition in range(args.repeat):
            for variant, (framework, threads) in variants.items():
                if variant == framework or threads == counts[0]:
                    for _ in range(3):
                        imports[framework].append((import_seconds(framework), load()))
                print(f"run {repetition + 1} {variant}: ...", end="", flush=True)
                result = run_child(framework, threads, args.data, args.epochs, args.batches)
                runs[variant].append(result)
                epochs = ", ".join(f"{w:.1f} s wall / {c:.1f} s CPU loss {loss:.4f}"
                                   for w, c, loss in zip(result["wall"], result["cpu"], result["loss"], strict=True))
                print(f"\rrun {repetition + 1} {variant}: epochs {epochs}; peak RSS {result['rss']:.0f} MB "
                      f"[load {result['load'][0]:.2f} -> {result['load'][1]:.2f}]", flush=True)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    print()
    jax_paths = [SITE_PACKAGES / n for n in JAX_PACKAGES] + sorted(
        p for n in JAX_PACKAGES for p in SITE_PACKAGES.glob(f"{n}-*.dist-info"))
    sizes = {"torch": f"du -sm {TORCH_VENV}: {du_mb([TORCH_VENV])} MB (the whole venv: torch + numpy)",
             "jax": f"du -sm of {'+'.join(JAX_PACKAGES)} (with their dist-info) in .venv: {du_mb(jax_paths)} MB, "
                    f"jaxlib alone {du_mb([SITE_PACKAGES / 'jaxlib'])} MB"}
    print(f"summary: median (min-max) of {args.repeat} run(s) per framework; load = 1-minute load average on "
          f"{os.cpu_count()} cores")
    for variant, (framework, _) in variants.items():
        results = runs[variant]
        first = [r["wall"][0] for r in results]
        later = [w for r in results for w in r["wall"][1:]]
        later_cpu = [c for r in results for c in r["cpu"][1:]]
        loads = [x for r in results for x in r["load"]]
        print(f"{variant}: {results[0]['version']}, {results[0]['shapes']} batch shapes")
        print(f"  first epoch (incl. compilation): {spread(first)} s wall, "
              f"{spread([r['cpu'][0] for r in results])} s CPU")
        print(f"  later epoch:                     {spread(later)} s wall, {spread(later_cpu)} s CPU")
        print(f"  peak RSS of the child:           {spread([r['rss'] for r in results], 0)} MB "
              f"(after loading, before training: {spread([r['rss_before'] for r in results], 0)} MB)")
        print(f"  import in a fresh interpreter:   {spread([s for s, _ in imports[framework]], 2)} s "
              f"({IMPORTS[framework]}) [load {spread([x for _, x in imports[framework]], 2)}]")
        print("  mean training loss per epoch:    "
              + "; ".join(" ".join(f"{loss:.4f}" for loss in r["loss"]) for r in results))
        print(f"  load during the runs:            {min(loads):.2f}-{max(loads):.2f}")
        print(f"  install size:                    {sizes[framework]}")
        print(f"  install time (the lead's pip, cache cold): {KNOWN_INSTALLS[framework]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
