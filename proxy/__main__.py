"""``python -m proxy`` is the ``lineage-proxy`` command."""

import sys

from proxy.cli.main import main

# Guarded: worker processes (spawned, proxy/server/workers.py) import this module again.
if __name__ == "__main__":
    sys.exit(main())
