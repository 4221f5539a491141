"""Whole-word matching, one rule for every reader of a dialogue.

The offline user agent, the offline judge, the failure reviewer and the audits all ask whether a turn
says a value; they agree only if they split text into words the same way.
"""

from __future__ import annotations

import re
from functools import lru_cache

_NON_WORD = re.compile(r"[^a-z0-9]+")


@lru_cache(maxsize=65536)
def words_of(text: str) -> str:
    """Lower case words separated by single spaces, padded so " value " matches whole words only.

    The simulated user reads the assistant's replies the same way, so both agree on what was applied.
    """
    return " " + _NON_WORD.sub(" ", text.lower()).strip() + " "
