"""`python -m personalens_utils.reproduce`: what `make reproduce` runs."""

import sys

from personalens_utils.reproduce.cli import main

if __name__ == "__main__":
    sys.exit(main())
