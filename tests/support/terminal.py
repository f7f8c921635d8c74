"""Summary lines compared with what a real run printed before cause lines were wrapped (issue 36, item 6).

The captured terminals cut a long cause at 110 characters (``…``) and put it on one line; the summary now
wraps the whole message onto indented lines. :func:`unwrapped` joins a cause's lines again, and
:func:`agrees_with_capture` holds every captured line: equal, or for a cut one, the same start before the
``…`` and the same ``→ what to do`` after it."""

from __future__ import annotations


def unwrapped(lines: list[str]) -> list[str]:
    """The summary with each cause, and each ``+N consequences`` line, on one line again: a line indented
    nine spaces or more that opens no ``+N consequences`` continues the one above it."""
    joined: list[str] = []
    for line in lines:
        if joined and line.startswith(" " * 9) and not line.lstrip().startswith("+"):
            joined[-1] = f"{joined[-1]} {' '.join(line.split())}"
        else:
            joined.append(line)
    return joined


def agrees_with_capture(lines: list[str], captured: list[str]) -> bool:
    """The summary says what the capture said, the parts a cut line left out now printed whole."""
    ours = unwrapped(lines)
    if len(ours) != len(captured):
        return False
    for mine, theirs in zip(ours, captured, strict=True):
        if "… → " in theirs:
            head, tail = theirs.split("… → ", 1)
            if not (mine.startswith(head.rstrip()) and mine.endswith(f"→ {tail}")):
                return False
        elif mine != theirs:
            return False
    return True
