"""Acting on the nodes a run found failing: taking them out of service within a cap, and bringing NVIDIA's
bug report home from hosts whose GPU checks FAILed.

``cap.py`` is the pure quarantine cap (how many nodes may be out at once, who is taken out first, the
cluster-wide ``quarantine.cap`` finding) and the ``quarantine`` records of results.json;
``kubernetes.py`` cordons and taints the nodes of failing pods during ``diagnose run --k8s-cordon`` and
``diagnose node-check --k8s`` (the per-node policy and kubectl command lines are in
:mod:`diagnose.k8s.nodes`; Slurm's drains in :mod:`diagnose.slurm.drain`); ``bug_report.py`` runs
``nvidia-bug-report.sh`` bounded in time and size; ``plan.py`` says all of it for ``--check``.
"""
