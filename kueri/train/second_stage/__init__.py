"""The second stage's training: its data (:mod:`.data`: the lexical run's candidates on the shipped sample with
their features and the grades they inherit from the earlier years' judgments), its fits (:mod:`.fit`), its
cross-validation over topics (:mod:`.cv`), the command that writes the shipped models (:mod:`.train`) and the
measurements made with the same data and folds (:mod:`.cascade`, :mod:`.dense`, :mod:`.comparative`).
"""
