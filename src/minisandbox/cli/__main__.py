"""`.venv/bin/python -m minisandbox.cli` runs the same entry point as the `minisandbox` script."""

import sys

from minisandbox.cli import main

sys.exit(main())
