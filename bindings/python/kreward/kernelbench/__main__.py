"""python3 -m kreward.kernelbench evaluate|suite ...: what `kreward evaluate
PROBLEM.py CANDIDATE.py` and `kreward suite DIR` run for KernelBench
problems (kernelbench/cli.py)."""
import sys

from .cli import main

sys.exit(main())
