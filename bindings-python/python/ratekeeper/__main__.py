"""``python -m ratekeeper``: the ``ratekeeper`` command (``explain``, ``simulate``)."""

from ratekeeper.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
