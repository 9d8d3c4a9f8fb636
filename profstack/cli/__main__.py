"""`python -m profstack.cli ...` is the `profstack` command."""

import sys

from profstack.cli import main

sys.exit(main())
