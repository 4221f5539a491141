"""Export of tables as CSV, LaTeX (booktabs) and Markdown under one naming convention."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd


def table_paths(output_dir: str | os.PathLike[str], number: int | str, slug: str) -> dict[str, Path]:
    stem = Path(output_dir) / "tables" / f"table{number}_{slug}"
    return {ext: stem.with_suffix(f".{ext}") for ext in ("csv", "tex", "md")}


def save_table(
    df: pd.DataFrame,
    output_dir: str | os.PathLike[str],
    number: int | str,
    slug: str,
    caption: str,
    *,
    index: bool = False,
    float_format: str = "{:.2f}",
) -> dict[str, Path]:
    """Write `df` as `<output_dir>/tables/table<number>_<slug>.{csv,tex,md}`; the caption goes in all three.

    The CSV keeps full precision (caption as a leading `#` comment line); LaTeX and Markdown are
    rounded with `float_format` for reading.
    """
    paths = table_paths(output_dir, number, slug)
    paths["csv"].parent.mkdir(parents=True, exist_ok=True)
    with paths["csv"].open("w", encoding="utf-8") as fh:
        fh.write(f"# {caption}\n")
        df.to_csv(fh, index=index)
    shown = df.copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else float_format.format(v))
    label = f"tab:{slug}"
    latex = shown.style.hide(axis="index") if not index else shown.style
    paths["tex"].write_text(
        latex.to_latex(caption=caption, label=label, hrules=True, position_float="centering"),
        encoding="utf-8",
    )
    align = ["right" if pd.api.types.is_numeric_dtype(df[col]) else "left" for col in df.columns]
    if index:
        align.insert(0, "left")
    body = shown.to_markdown(index=index, disable_numparse=True, colalign=align)
    markdown = f"**Table {number}.** {caption}\n\n{body}\n"
    paths["md"].write_text(markdown, encoding="utf-8")
    return paths


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read back a CSV written by `save_table` (skipping its caption line)."""
    return pd.read_csv(path, comment=None, skiprows=1)
