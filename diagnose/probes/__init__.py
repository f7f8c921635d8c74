"""Benchmarks after the collective sweep, each on by a playbook key: per-host fleet probes, the training
probe, the KV-cache transfer benchmark. Each launches a program of :mod:`diagnose.shipped`.
"""
