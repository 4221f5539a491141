"""Values that records, cards and sheets store as text, typed by what they name.

A backend's name is stored in every record (who answered), read back by analysis and filtered on by the
readers. Code that calls a model takes a `llm.role.Role`, never a backend's name beside a model's; these
types say that a value is the stored name, read or filtered as data.
"""

from __future__ import annotations

from typing import TypeAlias

BackendName: TypeAlias = str
"""A backend's name as stored ("offline", "anthropic", ...; an assistant written in Python stores its own
kind): a record's field, a card's entry, a reader's filter."""
