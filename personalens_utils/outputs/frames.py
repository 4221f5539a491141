"""Columns of a few repeated texts (model names, backends, statuses, dimensions) held as pandas
categoricals: a small code per row instead of a pointer to a string object, so a whole run's score
frame and the copies its tables filter out of it stay small, and grouping on them needs no hashing of
strings. Categories are kept sorted, so grouping and sorting order rows as the texts would."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
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


def _codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Each value's code (0: missing) and how many codes there are."""
    if is_categorical(column):
        return column.cat.codes.to_numpy(dtype=np.int64) + 1, len(column.cat.categories) + 1
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    return codes.astype(np.int64) + 1, len(uniques) + 1


def distinct(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`frame[columns].drop_duplicates()`: the first row of each combination, in frame order, with its
    index label. The combinations are numbered a column at a time (a column's codes joined to the
    numbers so far, then renumbered), so a frame of millions of rows needs two arrays of numbers at a
    time rather than one per column."""
    columns = list(columns)
    key = np.zeros(len(frame), dtype=np.int64)
    for name in columns:
        codes, count = _codes(frame[name])
        key, _ = pd.factorize(key * count + codes)
    first = np.sort(np.unique(key, return_index=True)[1]) if len(key) else np.zeros(0, dtype=np.int64)
    return frame.iloc[first][columns]
