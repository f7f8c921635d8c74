"""diagnose: accept and watch GPU training clusters over plain SSH."""

__version__ = "0.1.0"
