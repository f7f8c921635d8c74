"""Slurm as a host source and as an actor: nodes of an allocation or partition, drains the tool owns,
submitting the run as a batch job.
"""
