"""The stance models' training: stance-v1 and stance-v2 (:mod:`.v1`: TF-IDF sentence votes and a passage model),
the stance encoder (:mod:`.encoder`, on :mod:`.bert_jax`), the passage models stance-v3 (:mod:`.passages`, a head on
:mod:`.passage_data`'s states, :mod:`.heads`) and stance-v4 (:mod:`.tune`: its top layer tuned too, on
:mod:`.lower`'s states below it), and the measurements beside them (:mod:`.cv_encoders`, :mod:`.one_sentence`,
:mod:`.windows`).
"""
