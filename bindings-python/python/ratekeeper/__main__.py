"""``python -m ratekeeper``: the ``ratekeeper`` command (``explain``, ``simulate``)."""

from ratekeeper.cli import main

raise SystemExit(main())
