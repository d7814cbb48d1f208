"""Developer commands that build no model: the synthetic corpus of the benchmarks (:mod:`.corpus`), the kernel
comparisons behind docs/reproducibility.md (:mod:`.kernels`, :mod:`.kernel_noise`), Table 1's runs
(:mod:`.table1`), the per-topic plot, TIRA's inputs, the Java helper's compilation and the serve page's screenshot.
``scripts/`` holds their commands, a few lines each; ``python -m kueri.train`` lists them with the training ones.
"""
