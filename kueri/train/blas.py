"""The OpenBLAS kernel a shipped model was fitted with.

scikit-learn's fits multiply through OpenBLAS, which picks its kernel from the CPU when numpy loads (or takes the one
``OPENBLAS_CORETYPE`` names); another kernel sums in another order and moves a fitted weight, in the last digits or
by much more (docs/reproducibility.md). A command that writes a shipped model says so when this process's kernel is
not the one the shipped file was made with, since its bytes will then differ.
"""

from __future__ import annotations

#: The kernel each shipped file's scikit-learn fit ran on: named, the command writes the file's bytes again.
FITTED_WITH = {"stance-v2.npz": "Haswell", "stance-v3.npz": "SkylakeX", "stance-v4.npz": "SkylakeX"}


def openblas_kernels() -> set[str]:
    """The kernels of the OpenBLAS libraries loaded in this process (numpy's and scipy's)."""
    from threadpoolctl import threadpool_info

    return {str(pool["architecture"]) for pool in threadpool_info() if pool.get("internal_api") == "openblas"}


def kernel_note(shipped: str) -> str | None:
    """A line saying how to write ``shipped``'s bytes again when this process's kernel is not the one it was fitted
    with (None when it is, or when no kernel is recorded for it)."""
    wanted, running = FITTED_WITH.get(shipped), openblas_kernels()
    if wanted is None or running == {wanted}:
        return None
    return (f"note: OpenBLAS runs its {'/'.join(sorted(running)) or 'unknown'} kernel here; {shipped} was fitted "
            f"with {wanted}'s, so this file's bytes differ from it: OPENBLAS_CORETYPE={wanted} writes them again "
            "(docs/reproducibility.md)")
