"""Parsers for values read from /proc/sys."""

from __future__ import annotations

from diagnose.core.check import ParseError


def parse_port_range(text: str) -> dict[str, int]:
    """``net.ipv4.ip_local_port_range``: two integers separated by whitespace (a tab in the kernel's output)."""
    parts = text.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ParseError(f"expected two port numbers, got {text.strip()[:80]!r}")
    low, high = int(parts[0]), int(parts[1])
    if low > high:
        raise ParseError(f"low port {low} is above high port {high}")
    return {"low": low, "high": high, "width": high - low + 1}
