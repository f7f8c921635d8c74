"""Where hosts come from, every source behind one seam (:mod:`diagnose.targets.sources`): Ansible inventories
(YAML, INI, folders, ranges), the local machine, Slurm's nodes (``slurm_nodes.py``), Kubernetes pods chosen by
label (``k8s_pods.py``).
"""
