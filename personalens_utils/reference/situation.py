"""The five fields of the situation a task is given in, and how the official task files name them.

Here rather than in data/ because the prompt renderers label situations too, and prompts/ sits below
the stages (the offline backend imports it), so it must not load the data layer.
"""

from __future__ import annotations

SITUATION_FIELDS: dict[str, str] = {
    "location": "Location",
    "device": "Device",
    "time_of_day": "Time of Day",
    "day_of_week": "Day of the Week",
    "environment": "Environment",
}
"""Situation field (DataFrame column) -> key in the official task files."""
