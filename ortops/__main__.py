"""``python -m ortops ...`` is the ``ortops`` command."""

from ortops.tools.cli import main

raise SystemExit(main())
