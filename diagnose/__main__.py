"""``python -m diagnose``: the same entry point as the ``diagnose`` command."""

from diagnose.cli import main

raise SystemExit(main())
