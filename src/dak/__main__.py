"""``python -m dak`` runs the CLI."""

import sys

from dak.cli.main import main

sys.exit(main())
