"""A synthetic annotator, for runs without people: sheets filled with the judge's scores plus each
annotator's seeded offset and noise, every note saying SYNTHETIC, so a table made from them says so."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from personalens_utils.judging import DIMENSIONS as JUDGE_DIMENSIONS
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.sheets import RATED, read_table, write_table

SYNTHETIC_PREFIX = "synthetic-"
"""Annotator names of the synthetic annotator; a table made with any of them says so first."""


def synthetic_sheets(
    paths: Mapping[str, Path],
    scores: pd.DataFrame,
    *,
    annotators: int = 2,
    noise: float = 0.7,
    flip: float = 0.1,
    seed: int = 0,
) -> list[Path]:
    """Fill the exported sheet (`sheets.export_sheet`'s `paths`) as `annotators` synthetic annotators
    would, for offline runs without people: each rating is the judge's score of the dialogue (mean over
    judge samples) plus the annotator's own seeded offset and noise (sd `noise`), rounded to the scale;
    a task-completion verdict is flipped with probability `flip`. Annotators are named
    `synthetic-<k>`, files `synthetic_annotator_<k>.csv` beside the sheet, every note says SYNTHETIC.

    A file already there is kept when it holds exactly these ratings, else refused (never overwritten).
    """
    header, rows, delimiter = read_table(paths["sheet"])
    judge = scores[scores["score"].notna()].groupby(
        [scores["dialogue_id"].astype(str), scores["dimension"].astype(str)])["score"].mean()
    written = []
    for k in range(1, annotators + 1):
        rng = np.random.default_rng([seed, k])
        offset = rng.normal(0, noise / 2)
        filled = []
        for row in rows:
            out = dict(row, annotator=f"{SYNTHETIC_PREFIX}{k}",
                       notes="SYNTHETIC: seeded noise on the judge's score, not a person's rating")
            for dim in RATED:
                score = judge.get((row["dialogue_id"], dim))
                out[dim] = ("" if score is None
                            else _synthetic_rating(dim, float(score), offset, noise, flip, rng))
            filled.append(out)
        path = Path(paths["sheet"]).parent / f"synthetic_annotator_{k}.csv"
        if path.exists():
            if read_table(path)[1] != [{c: r.get(c, "") for c in header} for r in filled]:
                raise AnnotationError(f"{path} exists and holds other ratings; move it away (it may be "
                                      "someone's work) or fill another folder")
        else:
            write_table(path, header, filled, delimiter)
        written.append(path)
    return written


def _synthetic_rating(dimension: str, score: float, offset: float, noise: float, flip: float,
                      rng: np.random.Generator) -> str:
    dim = JUDGE_DIMENSIONS[dimension]
    if dim.family == "task_completion":
        verdict = score >= 0.5
        return str(verdict != (rng.random() < flip))
    value = round(score + offset + rng.normal(0, noise))
    return str(int(min(dim.high, max(dim.low, value))))
