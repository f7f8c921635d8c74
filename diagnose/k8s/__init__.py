"""Kubernetes pods as hosts: reading and discovering pods through ``kubectl``."""
