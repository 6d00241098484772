"""``python -m soak``: see :mod:`soak.run`."""

import sys

from soak.run import main

sys.exit(main())
