"""Columns of a few repeated texts as sorted categoricals, and the frame helpers that keep them so."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from personalens_utils.outputs.frames import as_categories, distinct, fill_missing, rows_of, with_categories


def mixed_frame(n: int = 5000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "model": pd.Categorical(rng.choice(["b", "a", None], n)),
        "backend": rng.choice(["offline", "anthropic"], n).astype(object),
        "sample": rng.integers(0, 3, n),
        "status": pd.Categorical(rng.choice(["ok", "missing"], n)),
    })
    frame.index = frame.index * 3 + 7
    return frame


@pytest.mark.parametrize("columns", [["model"], ["model", "backend"], ["backend", "sample"],
                                     ["model", "backend", "sample", "status"]])
def test_distinct_is_drop_duplicates(columns: list[str]) -> None:
    frame = mixed_frame()
    pd.testing.assert_frame_equal(distinct(frame, columns), frame[columns].drop_duplicates())


def test_distinct_of_nothing_is_empty() -> None:
    frame = mixed_frame().iloc[:0]
    assert distinct(frame, ["model", "backend"]).empty


def test_filling_a_categorical_adds_the_value_as_a_sorted_category() -> None:
    column = pd.Series(pd.Categorical(["kit", None, "kit"]))
    filled = fill_missing(column, "official")
    assert filled.tolist() == ["kit", "official", "kit"]
    assert list(filled.cat.categories) == ["kit", "official"]


def test_filling_a_categorical_from_another_column_takes_its_values_where_missing() -> None:
    column = pd.Series(pd.Categorical(["b", None, None]))
    other = pd.Series(pd.Categorical(["z", "a", "c"]))
    filled = fill_missing(column, other)
    assert filled.tolist() == ["b", "a", "c"] and list(filled.cat.categories) == ["a", "b", "c"]


def test_with_categories_leaves_other_columns_alone() -> None:
    texts = pd.Series(["a", "b"])
    assert with_categories(texts, ["c"]) is texts


def test_as_categories_sorts_the_categories_so_groups_come_in_text_order() -> None:
    frame = pd.DataFrame({"model": ["zeta", "alpha", "mu", "alpha"], "score": [1.0, 2.0, 3.0, 4.0]})
    as_categories(frame, ["model", "absent"])
    assert list(frame["model"].cat.categories) == ["alpha", "mu", "zeta"]
    assert frame.groupby("model")["score"].sum().index.tolist() == ["alpha", "mu", "zeta"]


def test_rows_of_copies_nothing_when_every_row_is_kept() -> None:
    frame = mixed_frame(10)
    assert rows_of(frame, frame["sample"] >= 0) is frame
    part = rows_of(frame, frame["sample"] == 0)
    assert part.index.tolist() == frame.index[frame["sample"] == 0].tolist()
