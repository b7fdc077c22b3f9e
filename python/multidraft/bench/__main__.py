"""``python -m multidraft.bench``: see :mod:`multidraft.bench.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
