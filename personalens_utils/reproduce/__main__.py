"""`python -m personalens_utils.reproduce`: what `make reproduce` runs."""

import sys

from .cli import main

sys.exit(main())
