"""The code that builds every shipped model (the ``train`` extra: ``pip install -e '.[train]'``).

Each job is written once and imported: the training data's readers (:mod:`kueri.train.data`, and the earlier
years' judgments in :mod:`kueri.train.judgments`), the cross-validation's folds (:mod:`kueri.train.folds`), the
adoption reports (:mod:`kueri.train.reports`), and the fitting of each model family: :mod:`kueri.train.quality`,
:mod:`kueri.train.second_stage`, :mod:`kueri.train.stance`. ``scripts/`` holds the commands, a few lines each;
``python -m kueri.train`` lists them.

Importing this package imports neither scikit-learn nor JAX: the functions that fit import them when they run.
"""
