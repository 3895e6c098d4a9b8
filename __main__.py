"""``python -m armtwin``: the ``armtwin`` command."""

from .scripts.cli import main

raise SystemExit(main())
