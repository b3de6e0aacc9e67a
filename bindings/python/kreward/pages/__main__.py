"""python3 -m kreward.pages FILE [--html OUT]: what `kreward report` and
`kreward suite DIR --html OUT` run (pages/cli.py)."""
import sys

from .cli import main

sys.exit(main())
