"""``python -m anywave``: the command line (:mod:`anywave.cli`)."""

import sys

from anywave.cli import main

sys.exit(main())
