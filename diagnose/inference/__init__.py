"""KV-cache transfer between prefill and decode GPUs (checklist section 5): the block geometry of a model,
the pairs worth measuring on a topology, and the verdicts on what the transfers measured.

Everything here is pure (facts and records in, values and verdicts out); the launch lives in
:mod:`diagnose.probes.kv_transfer` and the program that moves the blocks in :mod:`diagnose.shipped.kv_probe`.
"""
