"""What the operator asked for, loaded and checked before anything runs: playbooks, hardware profiles and
their expected values, ``-e`` overrides, per-host connection and benchmark settings.
"""
