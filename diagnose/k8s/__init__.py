"""Kubernetes through ``kubectl``: how a pod is reached, running kubectl, cordoning and tainting nodes. Pods as
hosts are a host source among the others, in :mod:`diagnose.targets.k8s_pods`.
"""
