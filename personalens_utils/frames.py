"""Columns of a few repeated texts (model names, backends, statuses, dimensions) held as pandas
categoricals: a small code per row instead of a pointer to a string object, so a whole run's score
frame and the copies its tables filter out of it stay small, and grouping on them needs no hashing of
strings. Categories are kept sorted, so grouping and sorting order rows as the texts would."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd


def is_categorical(column: pd.Series) -> bool:
    return isinstance(column.dtype, pd.CategoricalDtype)


def with_categories(column: pd.Series, values: Iterable[Any]) -> pd.Series:
    """A categorical `column` able to hold `values` too (categories stay sorted); others unchanged."""
    if not is_categorical(column):
        return column
    held = column.cat.categories
    new = {v for v in values if v is not None and v == v and v not in held}
    return column.cat.set_categories(sorted({*held, *new})) if new else column


def fill_missing(column: pd.Series, value: Any) -> pd.Series:
    """`column.fillna(value)` (a value or a Series aligned with it), categorical columns included."""
    if not is_categorical(column):
        return column.fillna(value)
    if isinstance(value, pd.Series):
        value = value.astype(object)
        return with_categories(column, value[column.isna()].unique()).fillna(value)
    return with_categories(column, [value]).fillna(value)


def as_categories(frame: pd.DataFrame, columns: Iterable[str]) -> None:
    """Hold each of `columns` the frame has as a categorical with sorted categories (in place)."""
    for name in columns:
        if name in frame.columns and not is_categorical(frame[name]):
            frame[name] = frame[name].astype("category")


def rows_of(frame: pd.DataFrame, keep: pd.Series) -> pd.DataFrame:
    """The rows `keep` marks; the frame itself when it keeps them all, so a run's whole score frame is not
    copied to select all of it (the frames are never changed in place)."""
    return frame if bool(keep.all()) else frame[keep]
