"""The record types of the run store, one per table, by stage, and their JSON layout.

Each type names its table (`table`), computes its id from its identity fields with the same
`stable_id` recipe, and turns into / reads back from the JSON object stored on one line of the table
through the one mechanism of `records.base` (docs/architecture.md, "Run store records"):
`to_json(from_json(line))` gives back the stored object, key order included. A line that does not fit
its type raises `RecordError` naming the file, the line and the field, and how to repair the store.

The types live by stage (`simulation`, `judging`, `validation`, `generation`, `batches`,
`persona_bench`); this module gathers them under the names they always had and lists every one of them
in `RECORD_TYPES`, so any process knows every table without importing a stage.

Variants: whose prompts made a dialogue or judgment (the prompt set and its version) and which sample
it is are one `identity.Variant`, which the record holds and stores through; a kit record of sample 0
keeps the line and the id recipe it always had, so records written before prompt sets and samples
existed read as the kit's first sample with their ids unchanged.
"""

from __future__ import annotations

from personalens_utils.prompt_sets.official.templates import KIT_PROMPTS, OFFICIAL_PROMPTS
from personalens_utils.runstore.identity import stable_id
from personalens_utils.runstore.records.base import (
    ERROR,
    LAYOUT_HINT,
    OFFLINE,
    Form,
    Record,
    RecordError,
    stored_hints,
)
from personalens_utils.runstore.records.batches import Batch, BatchEntry
from personalens_utils.runstore.records.generation import (
    GENERATION_STEPS,
    GenerationStep,
    InteractionsStep,
    MaskStep,
    MdTasksStep,
    PreferencesStep,
    SdTasksStep,
    SituationStep,
)
from personalens_utils.runstore.records.judging import Blame, Judgment, ProbeJudgment
from personalens_utils.runstore.records.persona_bench import PersonaPrediction
from personalens_utils.runstore.records.simulation import Dialogue, DialogueSummary
from personalens_utils.runstore.records.validation import ConsistencyCheck

RECORD_TYPES: tuple[type[Record], ...] = (
    Dialogue,
    Judgment,
    Blame,
    ConsistencyCheck,
    *GENERATION_STEPS.values(),
    Batch,
    BatchEntry,
    PersonaPrediction,
    ProbeJudgment,
)
"""Every record type a run store may hold, one per table: what tools that must see every table
(`store.merge_stores`, the evaluation's store copy) read. A new record type is one entry here."""


def stored_types() -> tuple[type[Record], ...]:
    """Every record type a run store may hold (`RECORD_TYPES`)."""
    return RECORD_TYPES


def record_type(table: str) -> type[Record]:
    """The record type stored in a table, by the table's name."""
    kinds = stored_types()
    for kind in kinds:
        if kind.table == table:
            return kind
    known = [kind.table for kind in kinds]
    raise RecordError(f"no record type is stored in a table named {table!r}; known: {known}")


__all__ = [
    "ERROR",
    "GENERATION_STEPS",
    "KIT_PROMPTS",
    "LAYOUT_HINT",
    "OFFICIAL_PROMPTS",
    "OFFLINE",
    "RECORD_TYPES",
    "Batch",
    "BatchEntry",
    "Blame",
    "ConsistencyCheck",
    "Dialogue",
    "DialogueSummary",
    "Form",
    "GenerationStep",
    "InteractionsStep",
    "Judgment",
    "MaskStep",
    "MdTasksStep",
    "PersonaPrediction",
    "PreferencesStep",
    "ProbeJudgment",
    "Record",
    "RecordError",
    "SdTasksStep",
    "SituationStep",
    "record_type",
    "stable_id",
    "stored_hints",
    "stored_types",
]
