"""``python -m proxy`` is the ``lineage-proxy`` command."""

import sys

from proxy.cli import main

sys.exit(main())
