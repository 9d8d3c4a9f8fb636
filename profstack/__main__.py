"""`python -m profstack ...` is the `profstack` command."""

import sys

from profstack.cli import main

sys.exit(main())
