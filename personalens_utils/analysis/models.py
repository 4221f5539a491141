"""Table 11 of the paper, written from the model registry: each of the paper's models, its role,
the short name the official code gives it, and what the kit calls for it on each backend today (the
id, or the successor where the paper's model is retired), with list prices and the dates prices and
retirements were read.

The paper's table gives versions only; the kit adds backends, successors and prices because a
re-run today cannot call every model the paper did, and a reader must see what was called instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from personalens_utils.base.stored import BackendName
from personalens_utils.llm import registry
from personalens_utils.llm.registry import ModelInfo
from personalens_utils.outputs.latex import Block, Printed
from personalens_utils.outputs.tables import Source, TableResult

REAL_BACKENDS = ("anthropic", "bedrock", "openai")
_NO_PRICE = {"openai": "self-hosted, no price", "bedrock": "Bedrock price not recorded"}
"""Why a row has no price: a model served on one's own server, or a Bedrock price the registry lacks."""


def _called(info: ModelInfo, backend: BackendName, by_name: dict[str, ModelInfo]) -> tuple[str, ModelInfo]:
    """The status of `info` on `backend` and the model called for it there."""
    retired = info.retired.get(backend)
    if not retired:
        return "no retirement recorded", info
    successor = by_name.get(info.successor)
    if successor is None:
        raise ValueError(f"{info.name} is retired on {backend} but its successor {info.successor!r} "
                         "is not in the registry given")
    return f"retired {retired}", successor


def table11(
    models: Sequence[ModelInfo] = registry.MODELS,
    *,
    backends: Sequence[str] = REAL_BACKENDS,
    prices_taken: str = registry.PRICES_TAKEN,
    lifecycle_taken: str = registry.LIFECYCLE_TAKEN,
) -> TableResult:
    """One row per paper model and backend it (or its successor) can be called on."""
    unknown = sorted(set(backends) - set(registry.KNOWN_BACKENDS) - {"offline"})
    if unknown:
        raise ValueError(f"unknown backends {unknown}; known: {', '.join(registry.KNOWN_BACKENDS)}")
    by_name = {info.name: info for info in models}
    rows = []
    for info in models:
        if not info.paper_roles:
            continue
        for backend in backends:
            status, called = _called(info, backend, by_name)
            if backend not in called.ids:
                continue
            price = called.price
            rows.append({
                "model": info.name,
                "paper version": info.paper_version,
                "official name": info.official_name,
                "paper role": ", ".join(info.paper_roles),
                "backend": backend,
                "status": status,
                "model called": called.name,
                "id called": called.ids[backend],
                "input USD/Mtok": float("nan") if price is None else price.input,
                "output USD/Mtok": float("nan") if price is None else price.output,
                "prices read": prices_taken if price is not None else _NO_PRICE.get(backend, "no price"),
            })
    if not rows:
        raise ValueError("the registry given holds no model with a paper role (ModelInfo.paper_roles)")
    frame = pd.DataFrame(rows)
    caption = (
        "The paper's models (its Table 11), their roles, and what the kit calls for each on each backend; "
        "where a paper model is retired its successor is called. List prices in USD per million tokens "
        f"read {prices_taken}; retirements checked {lifecycle_taken}. Written from "
        "personalens_utils/llm/registry.py; no model was called to make it."
    )
    source = Source.of("llm/registry.py", len(frame), "model-backend rows", backends,
                       frame["model called"])
    return TableResult(frame, caption, source, printed=printed_table11)


def printed_table11(shown: pd.DataFrame) -> Printed:
    """Table 11 for a paper: the paper's models once (version, official name, role), then under each
    model the backends with the retirement date, the successor called and its id and prices, so no
    column repeats what a heading says."""
    paper = shown[["model", "paper version", "official name", "paper role"]].drop_duplicates("model")
    paper = paper.rename(columns={"model": "Model", "paper version": "Paper version",
                                  "official name": "Official name", "paper role": "Paper role"})
    retired = shown["status"].str.removeprefix("retired ")
    calls = pd.DataFrame({
        "model": shown["model"],
        "Backend": shown["backend"],
        "Retired": retired.where(shown["status"].str.startswith("retired "), "--"),
        "Successor": shown["model called"].where(shown["model called"] != shown["model"], "--"),
        "Id called": shown["id called"],
        "In": shown["input USD/Mtok"],
        "Out": shown["output USD/Mtok"],
    })
    dated = shown.loc[shown["input USD/Mtok"].astype(str).str.strip() != "", "prices read"]
    unpriced = sorted(set(shown.loc[~shown.index.isin(dated.index), "prices read"]))
    legend = (
        "Retired: the date the paper's model was retired on that backend, after which its successor is "
        "called (-- none recorded). In, Out: list prices in USD per million input and output "
        f"tokens, read {', '.join(sorted(set(dated)))}"
        + (f"; -- where there is none ({'; '.join(unpriced)})." if unpriced else ".")
    )
    return Printed((Block(paper.reset_index(drop=True)), Block(calls, group="model")), legend)
