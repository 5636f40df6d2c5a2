"""``python -m luma``: the same as the ``luma`` command."""

from luma.cli import main

raise SystemExit(main())
