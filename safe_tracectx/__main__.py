"""``python -m safe_tracectx``: the same as the ``safe-tracectx`` command."""

import sys

from safe_tracectx.cli import main

if __name__ == "__main__":
    sys.exit(main())
