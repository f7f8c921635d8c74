"""Slurm as an actor: drains the tool owns, submitting the run as a batch job. Its nodes as hosts are a host
source among the others, in :mod:`diagnose.targets.slurm_nodes`.
"""
