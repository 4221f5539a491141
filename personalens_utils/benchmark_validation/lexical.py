"""Lexical diversity of dialogues (paper Table 10): Dist-1, Dist-2, Ent-4 and Self-BLEU.

Tokens come from sacrebleu's default 13a tokenizer and BLEU from sacrebleu's own n-gram extraction
and scoring, so Self-BLEU equals `sacrebleu.sentence_bleu(utterance, all_other_utterances)`
averaged over utterances (the tests check this). The paper does not say over which unit the
measures were taken; the kit's choice, documented in docs/validation.md:

- Dist-n and Ent-4 are computed per dialogue (all its utterances pooled) and averaged over
  dialogues, since corpus-wide ratios shrink with corpus size and would not compare across runs;
- Self-BLEU takes every utterance of a (seeded) sample as hypothesis against all other utterances
  of the sample as references, since BLEU needs other texts to be redundant with.

The sample is drawn from the utterances sorted by text and every mean is an exact sum (`math.fsum`),
so the table does not depend on the order the dialogues were stored in.
"""

from __future__ import annotations

import bisect
import math
import os
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.helpers import extract_all_word_ngrams
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from personalens_utils.base.errors import KitError
from personalens_utils.runstore.records import Dialogue
from personalens_utils.runstore.store import RunStore

BLEU_ORDER = 4
GROUP_ORDER = ("SD", "MD")
"""Groups listed first, in the paper's order; any others follow alphabetically."""
SELF_BLEU_SAMPLE = 1000
"""Utterances per group Self-BLEU is computed over (each against the rest of the sample)."""


class LexicalInputError(KitError, ValueError):
    """Dialogue input that the lexical measures cannot use."""


@cache
def _tokenizer() -> Tokenizer13a:
    return Tokenizer13a()


def tokenize(text: str) -> list[str]:
    """sacrebleu's 13a tokenization (punctuation split off, case kept), as BLEU sees the text."""
    return _tokenizer()(text.rstrip()).split()


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(texts: Iterable[str], n: int) -> float:
    """Distinct n-grams over all n-grams of the pooled texts (n-grams do not cross text borders).

    NaN when the texts hold no n-gram at all.
    """
    grams = [g for text in texts for g in ngrams(tokenize(text), n)]
    return len(set(grams)) / len(grams) if grams else math.nan


def ngram_entropy(texts: Iterable[str], n: int = 4) -> float:
    """Shannon entropy (nats) of the n-gram frequency distribution of the pooled texts; NaN if none."""
    counts = Counter(g for text in texts for g in ngrams(tokenize(text), n))
    total = sum(counts.values())
    if not total:
        return math.nan
    return -math.fsum(c / total * math.log(c / total) for c in counts.values())


def self_bleu(texts: Sequence[str]) -> float:
    """Mean sentence BLEU (0-1, sacrebleu defaults: exp smoothing, effective order) of each text
    against all the others as references. Texts that tokenize to nothing are left out.

    Runs in one pass: for each n-gram the two largest per-text counts are kept, so the clipping count
    "maximum over all other texts" needs no re-scan per hypothesis.
    """
    grams: list[Counter[tuple[str, ...]]] = []
    lengths: list[int] = []
    for text in texts:
        counter, length = extract_all_word_ngrams(" ".join(tokenize(text)), 1, BLEU_ORDER)
        if length:
            grams.append(counter)
            lengths.append(length)
    if len(grams) < 2:
        raise LexicalInputError(f"Self-BLEU needs at least two non-empty texts, got {len(grams)}")
    top: dict[tuple[str, ...], list[int]] = {}
    for i, counter in enumerate(grams):
        for gram, count in counter.items():
            best = top.get(gram)
            if best is None:
                top[gram] = [count, i, 0]
            elif count > best[0]:
                top[gram] = [count, i, best[0]]
            elif count > best[2]:
                best[2] = count
    sorted_lengths = sorted(lengths)
    scores = []
    for i, counter in enumerate(grams):
        correct = [0] * BLEU_ORDER
        total = [0] * BLEU_ORDER
        for gram, count in counter.items():
            order = len(gram) - 1
            total[order] += count
            first, owner, second = top[gram]
            correct[order] += min(count, second if owner == i else first)
        ref_len = _closest_other_length(sorted_lengths, lengths[i])
        score = BLEU.compute_bleu(correct, total, lengths[i], ref_len, smooth_method="exp",
                                  effective_order=True, max_ngram_order=BLEU_ORDER)
        scores.append(score.score / 100.0)
    return math.fsum(scores) / len(scores)


def _closest_other_length(sorted_lengths: list[int], own: int) -> int:
    """sacrebleu's closest reference length (ties go to the shorter) among all lengths but one `own`."""
    others = list(sorted_lengths)
    others.pop(bisect.bisect_left(others, own))
    pos = bisect.bisect_left(others, own)
    candidates = others[max(pos - 1, 0) : pos + 1]
    return min(candidates, key=lambda length: (abs(length - own), length))


def dialogue_utterances(record: Mapping[str, Any], where: str = "dialogue") -> list[str]:
    """The utterances (user and assistant turns) of one dialogue record of the run store."""
    turns = record.get("turns")
    if not isinstance(turns, list):
        raise LexicalInputError(f"{where}: record has no 'turns' list")
    out = []
    for k, turn in enumerate(turns):
        if not isinstance(turn, Mapping) or not isinstance(turn.get("content"), str):
            raise LexicalInputError(f"{where}: turn {k} has no text 'content'")
        out.append(turn["content"])
    return out


def lexical_diversity(
    dialogues: Iterable[Mapping[str, Any]],
    *,
    group_by: str = "task_type",
    self_bleu_sample: int = SELF_BLEU_SAMPLE,
    seed: int = 0,
) -> pd.DataFrame:
    """Table 10's measures per group of dialogue records (default: SD and MD).

    Records with status "error" are skipped. Columns: the group, `# Dial`, `Dist-1`, `Dist-2`,
    `Ent-4` (means over dialogues that have such n-grams), `Self-BLEU` (over at most
    `self_bleu_sample` utterances drawn with `seed`), and `# Utt. (Self-BLEU)`.
    """
    groups: dict[str, list[list[str]]] = {}
    for i, record in enumerate(dialogues):
        if record.get("status") == "error":
            continue
        where = f"dialogue {record.get('id', f'#{i}')}"
        if group_by not in record:
            raise LexicalInputError(f"{where}: no {group_by!r} field to group by")
        groups.setdefault(str(record[group_by]), []).append(dialogue_utterances(record, where))
    if not groups:
        raise LexicalInputError("no dialogues to measure (all missing or failed)")
    rows = []
    known = {g: i for i, g in enumerate(GROUP_ORDER)}
    for name in sorted(groups, key=lambda g: (known.get(g, len(known)), g)):
        dials = groups[name]
        utterances = sorted(u for d in dials for u in d if tokenize(u))
        sample = utterances
        if len(utterances) > self_bleu_sample:
            sample = random.Random(seed).sample(utterances, self_bleu_sample)
        rows.append({
            group_by: name,
            "# Dial": len(dials),
            "Dist-1": _mean(distinct_n(d, 1) for d in dials),
            "Dist-2": _mean(distinct_n(d, 2) for d in dials),
            "Ent-4": _mean(ngram_entropy(d, 4) for d in dials),
            "Self-BLEU": self_bleu(sample) if len(sample) >= 2 else math.nan,
            "# Utt. (Self-BLEU)": len(sample),
        })
    return pd.DataFrame(rows)


def _mean(values: Iterable[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return math.fsum(kept) / len(kept) if kept else math.nan


def run_store_lexical_diversity(
    run_dir: str | os.PathLike[str],
    task_types: Sequence[str] = ("SD", "MD"),
    *,
    self_bleu_sample: int = SELF_BLEU_SAMPLE,
    seed: int = 0,
    assistant_models: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, set[str]]:
    """Table 10's measures over the dialogues of a run store (of `assistant_models` only, when given),
    and the backends that made them.

    Raises FileNotFoundError when the run folder holds no dialogues.jsonl (run simulation first).
    """
    path = Path(run_dir) / f"{Dialogue.table}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no dialogues to measure: {path} does not exist (run notebook 03 first)")
    records = sorted(
        (r for r in RunStore(run_dir).records(Dialogue) if r.get("task_type") in task_types
         and (assistant_models is None or r.get("assistant_model") in assistant_models)),
        key=lambda r: r["id"],
    )
    table = lexical_diversity(records, self_bleu_sample=self_bleu_sample, seed=seed)
    return table, {str(r.get("backend")) for r in records if r.get("status") != "error"}
