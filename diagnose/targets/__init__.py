"""Where hosts come from: Ansible inventories (YAML, INI, folders, ranges), the local machine; the host
sources of Slurm and Kubernetes plug into the same seam (:mod:`diagnose.targets.sources`).
"""
