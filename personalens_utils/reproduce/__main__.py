"""`python -m personalens_utils.reproduce`: what `make reproduce` runs."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
