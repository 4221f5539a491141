"""The one parameter set every notebook of a reproduction runs from, and the models it names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personalens_utils import prompt_sets
from personalens_utils.assistants import AssistantSpec
from personalens_utils.assistants.reference_assistants import (
    DESIGNED_ORDER,
    FOCUS_ASSISTANT,
    SETTING_ASSISTANT,
)
from personalens_utils.base.paths import project_root, runs_dir
from personalens_utils.base.stored import BackendName
from personalens_utils.llm.options import ClientOptions
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.prompt_sets import PromptSet

OFFLINE_ASSISTANTS = DESIGNED_ORDER
"""Offline, Table 3 compares reference assistants of a known order (assistants/reference_assistants.py)."""
OFFLINE_ABLATION = SETTING_ASSISTANT
"""The offline ablation assistant: it uses exactly the context each setting gives."""
OFFLINE_FOCUS = FOCUS_ASSISTANT
"""The offline assistant of Figures 4, 5 and Table 13: its per-domain scores vary with the summaries."""
ANTHROPIC_ASSISTANTS = ("Claude Haiku 4.5", "Claude Sonnet 4.5")
PERSONA_USERS = 12
"""Users of the synthetic PERSONA Bench data notebook 08 writes and runs offline in the generated pass."""
TRUST_PROBE_USERS, TRUST_PROBE_TASKS = 6, 10
"""Notebook 07's probe design in a reproduction: the first 6 users, 10 tasks of each type per user (its
probes re-judge each of those dialogues; sized so 07 runs offline in well under three minutes)."""
TRUST_REPEATS, TRUST_JUDGE_SAMPLES = 2, 2
"""Notebook 07 simulates each design scenario twice per assistant (03's dialogue and one more) and judges
each of those dialogues twice: the variance decomposition, the power plan and the card's self-consistency."""
ROBUSTNESS_USERS, ROBUSTNESS_TASK_TYPES = 10, ("SD",)
ROBUSTNESS_STYLES, ROBUSTNESS_REPEATS = ("cooperative", "reticent"), 2
"""Notebook 10's grid in a reproduction: the pass's assistants, user agent and judge under two styles on the
SD tasks of the pass's first 10 users, each scenario twice so Table R5 has pass^2 to estimate; the first
cooperative try is 03's and 04's records, so only the rest and their judgments are made (seconds offline)."""
PASSES = ("generated", "official")
"""A small benchmark notebook 01 generates on the spot, and the official data when the kit finds it."""
MAX_CONCURRENCY = 16
"""Model calls in flight per backend in a reproduction, unless `--max-concurrency` says otherwise."""


@dataclass
class Settings:
    """The one parameter set every notebook of a reproduction is run from."""

    run: str
    backend: BackendName = "offline"
    user_model: str = "Claude 3 Sonnet"
    assistant_models: tuple[str, ...] = OFFLINE_ASSISTANTS
    ablation_model: str = OFFLINE_ABLATION
    focus_model: str | None = OFFLINE_FOCUS
    """The assistant of Figures 4, 5 and Table 13; None: the ablation assistant."""
    judge_model: str = "Claude 3.5 Sonnet"
    second_judge_model: str = "Claude 3.7 Sonnet"
    reviewer_model: str = "Claude 3.7 Sonnet"
    """Who blames each failed dialogue in notebook 09 (never the judge)."""
    compare_assistant: str | None = None
    """An assistant (e.g. one written in Python) notebook 05 compares with the ablation one in Table 3."""
    official_users: str = "sample_50"
    ablation_users: int = 20
    generated_users: int = 20
    task_types: tuple[str, ...] = ("SD", "MD")
    domains: tuple[str, ...] | None = None
    sd_tasks_per_domain: int | None = None
    md_tasks: int | None = None
    """The generated benchmark's size (notebook 01's parameters of these names); None leaves 01 its own
    default and is not passed, so a run without them gives 01 the parameters it always had."""
    max_concurrency: int | dict[str, int] = MAX_CONCURRENCY
    """One bound for every backend, or a mapping with a bound for every known backend (and any `openai@VAR`
    endpoint named): notebooks 01-09 give a backend their mapping leaves out 8, not the run's default."""
    request_timeout_s: float = ClientOptions.request_timeout_s
    call_deadline_s: float = ClientOptions.call_deadline_s
    """Time limits of every model call (notebooks 03-05, docs/parameters.md)."""
    seed: int = 0
    """Sampling and resampling seed: bootstrap, permutation, Self-BLEU and annotation samples."""
    backend_seed: int = 0
    """Seed of the offline backend in every notebook that calls a model."""
    demographics_seed: int = 0
    """Seed of the demographics notebook 01 samples for the generated benchmark."""
    benchmark_dir: Path | None = None
    passes: tuple[str, ...] = PASSES
    annotations: str | None = None
    prompt_set: str = "kit"
    """Whose prompts notebooks 03-06 use: the kit's, or the official code's (docs/simulation.md)."""
    official_code: Path | None = None
    """The official code the official prompts are read from; None: $PERSONALENS_CODE or found beside the
    data."""
    scoring: str = "strict"
    """How notebooks 04 and 06 read judge answers: the kit's parser, or the official one (docs/judging.md)."""
    batch: bool = False
    """Notebooks 03 and 04 send their calls through the backend's batch API (docs/simulation.md)."""
    argv: tuple[str, ...] = ()
    notebooks_dir: Path = field(default_factory=lambda: project_root() / "notebooks")

    def prompts(self) -> PromptSet:
        """The prompt set notebooks 03-06 use (the official one read from `official_code` here, so a copy
        that cannot be read raises `OfficialCodeError`)."""
        return prompt_sets.prompt_set(self.prompt_set, self.official_code)

    def generation_sizes(self) -> dict[str, Any]:
        """The size parameters of notebook 01 this run sets (see `domains`)."""
        sizes = {"domains": list(self.domains) if self.domains else None,
                 "sd_tasks_per_domain": self.sd_tasks_per_domain, "md_tasks": self.md_tasks}
        return {name: value for name, value in sizes.items() if value is not None}

    @property
    def focus(self) -> str:
        return self.focus_model or self.ablation_model

    @property
    def root(self) -> Path:
        return runs_dir() / self.run


ASSISTANT_ROLES = ("assistant ", "ablation assistant", "compared assistant")
"""Roles (by the start of their name in `role_models`) played by an assistant under test."""


def role_models(settings: Settings) -> dict[str, str]:
    """Every role of the reproduction and the model text it was given."""
    return {"user agent": settings.user_model,
            **{f"assistant {m}": m for m in settings.assistant_models},
            "ablation assistant": settings.ablation_model,
            "judge": settings.judge_model,
            "second judge": settings.second_judge_model,
            "reviewer": settings.reviewer_model,
            **({"compared assistant": settings.compare_assistant} if settings.compare_assistant else {})}


def is_assistant_role(role: str) -> bool:
    return role.startswith(ASSISTANT_ROLES)


def role_spec(settings: Settings, role: str, text: str, what: str) -> ModelSpec | AssistantSpec:
    """One role's spec as its notebook reads it: an assistant's as an assistant spec (any kind of
    assistant), every other role's as a model spec; `SpecError` names `what`."""
    if is_assistant_role(role):
        return AssistantSpec.parse(text, settings.backend, what=what)
    return ModelSpec.parse(text, settings.backend, what=what)


def role_specs(settings: Settings) -> dict[str, ModelSpec | AssistantSpec]:
    """Every role's spec (`backend:model`, a model on `--backend`, or for an assistant any assistant
    spec); a spec that cannot be read raises `SpecError` naming the role."""
    return {role: role_spec(settings, role, text, role) for role, text in role_models(settings).items()}


def model_name(settings: Settings, text: str) -> str:
    """The model name a model spec's records carry (notebook 06 selects stored records by name)."""
    return ModelSpec.parse(text, settings.backend).model


def assistant_name(settings: Settings, text: str) -> str:
    """The model name an assistant spec's records carry."""
    return AssistantSpec.parse(text, settings.backend).model


def audit_arms(settings: Settings) -> tuple[str, str] | None:
    """Notebook 09's task audit arms as "model:setting": None for its default, the blind and the full
    reference assistant, when both are among the assistants; else the ablation assistant in notebook
    05's "base" and "base+all" settings."""
    if {DESIGNED_ORDER[0], DESIGNED_ORDER[-1]} <= set(settings.assistant_models):
        return None
    model = assistant_name(settings, settings.ablation_model)
    return f"{model}:base", f"{model}:base+all"
