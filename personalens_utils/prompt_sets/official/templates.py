"""The official PersonaLens prompts, read at run time from the user's copy of the authors' code.

The official prompt text is licensed CC-BY-NC-4.0, so the kit does not ship it. With
`prompt_set="official"` the kit reads the template strings out of the user's copy (`find_official_code`
in `paths`): each official module is parsed with `ast`, nothing of it is imported or run, and only
string literals are kept. The functions below fill those templates the way the official scripts fill
them (same field text, section order and transcript form), so a request holds the same system text
and single user message the official code sends. Where the official scripts differ between
single-domain and multi-domain tasks (src/generate_dialogue.py and src/generate_dialogue_md.py, the
`-md` judge), the task type chooses. The numbers of each call (temperature, max_tokens) are facts of
the official scripts and live with the request builders.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from personalens_utils.base.errors import KitError
from personalens_utils.base.paths import CODE_ENV, OFFICIAL_CODE_FILES, find_official_code

KIT_PROMPTS, OFFICIAL_PROMPTS = "kit", "official"
"""The names of the kit's and the official prompt sets (`prompt_sets.KitPrompts`, `OfficialPromptSet`)."""

ASSISTANT_MODULE, JUDGE_MODULE, SD_SCRIPT, MD_SCRIPT = OFFICIAL_CODE_FILES
USER_TEMPLATE_CLASS = "UserPromptTemplate"
USER_ATTRIBUTES = ("system_prompt", "task_prompt_initial_query", "task_prompt")
"""The user agent's templates: attributes set in the official UserPromptTemplate.__init__."""

FAMILIES = ("CLAUDE", "LLAMA", "MISTRAL")
"""The official assistant prompt families; a script picks one by the assistant model's name."""
SETTING_SUFFIX = {"base": "", "base+D": "_D", "base+I": "_P", "base+S": "_S", "base+all": "_DPS"}
"""Kit assistant setting -> suffix of the official task prompt (the official -d, -p, -si flags)."""
VANILLA = "vanilla"
VANILLA_SUFFIX = "_VANILLA"
"""The official vanilla prompt pair exists for the Claude family only."""

JUDGE_TEMPLATES = {
    "task_completion": "EVAL_DIALOGUE_TASK_COMPLETION",
    "personalization": "EVAL_DIALOGUE_PERSONALIZATION",
    "naturalness_user": "EVAL_DIALOGUE_NATURALNESS_USER",
    "naturalness_assistant": "EVAL_DIALOGUE_NATURALNESS_ASSISTANT",
    "coherence_user": "EVAL_DIALOGUE_COHERENCE_USER",
    "coherence_assistant": "EVAL_DIALOGUE_COHERENCE_ASSISTANT",
}
"""Kit judge dimension -> the official template; turn-level personalization has none."""

WHERE_TO_GET = (
    "prompt_set='official' reads the official prompts from your copy of the authors' code, which the kit "
    "does not ship (CC-BY-NC-4.0): clone https://github.com/amazon-science/PersonaLens and set "
    f"{CODE_ENV}=/path/to/PersonaLens, or pass official_code='/path/to/PersonaLens' to the notebook or "
    "`make reproduce` (docs/simulation.md, 'Prompt sets')"
)


class OfficialCodeError(KitError, ValueError):
    """The official code is missing or not the one the kit knows how to read; says what to do."""


class OfficialPromptError(KitError, ValueError):
    """A call the official code never makes (a setting without an official flag, a vanilla Llama)."""


def _strings(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "literal" assignments."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _user_templates(tree: ast.Module) -> dict[str, str]:
    """self.<attribute> = "literal" assignments in the user-agent template class's __init__."""
    out: dict[str, str] = {}
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == USER_TEMPLATE_CLASS):
            continue
        for func in cls.body:
            if not (isinstance(func, ast.FunctionDef) and func.name == "__init__"):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str):
                    text = node.value.value
                    out.update({t.attr: text for t in node.targets if isinstance(t, ast.Attribute)})
    return out


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise OfficialCodeError(f"cannot read {path} as Python source ({exc}); {WHERE_TO_GET}") from exc


@dataclass(frozen=True)
class OfficialPrompts:
    """The official templates read from one copy of the code; `version` fingerprints their text, so
    records made from two different copies never share an id."""

    folder: Path
    assistant: Mapping[str, str]
    judge: Mapping[str, str]
    user: Mapping[str, Mapping[str, str]]
    """Task type ("SD", "MD") -> the user agent's templates (USER_ATTRIBUTES)."""

    @cached_property
    def version(self) -> str:
        texts = [*self.assistant.items(), *self.judge.items(),
                 *((f"{kind}.{k}", v) for kind, group in sorted(self.user.items()) for k, v in group.items())]
        digest = hashlib.sha256("\x00".join(f"{k}\x00{v}" for k, v in sorted(texts)).encode()).hexdigest()
        return f"official-{digest[:12]}"

    def texts(self) -> list[str]:
        """Every template string read (tests scan the kit for them)."""
        return [*self.assistant.values(), *self.judge.values(),
                *(v for group in self.user.values() for v in group.values())]

    def assistant_templates(self, setting: str, family: str) -> tuple[str, str]:
        """(system text, task template) the official scripts give the assistant in `setting`."""
        if setting == VANILLA:
            system, task = f"{family}_SYSTEM_PROMPT{VANILLA_SUFFIX}", f"{family}_TASK_PROMPT{VANILLA_SUFFIX}"
        elif setting in SETTING_SUFFIX:
            system, task = f"{family}_SYSTEM_PROMPT", f"{family}_TASK_PROMPT{SETTING_SUFFIX[setting]}"
        else:
            raise OfficialPromptError(
                f"the official code has no assistant prompt for setting {setting!r}: its flags give "
                f"{[VANILLA, *SETTING_SUFFIX]}; run this setting with prompt_set='kit'"
            )
        missing = [name for name in (system, task) if name not in self.assistant]
        if missing:
            raise OfficialPromptError(
                f"the official code ({self.folder / ASSISTANT_MODULE}) defines no {missing} for a "
                f"{family.lower()} assistant in setting {setting!r}; run it with prompt_set='kit'"
            )
        return self.assistant[system], self.assistant[task]


def read_official_prompts(folder: Path) -> OfficialPrompts:
    """Every template the kit needs from the official code in `folder`, or OfficialCodeError naming
    what is missing."""
    assistant = _strings(_parse(folder / ASSISTANT_MODULE))
    judge = _strings(_parse(folder / JUDGE_MODULE))
    user = {kind: _user_templates(_parse(folder / script)) for kind, script in (("SD", SD_SCRIPT),
                                                                                 ("MD", MD_SCRIPT))}
    assistant_names = [f"{family}_{name}" for family in FAMILIES
                       for name in ("SYSTEM_PROMPT", *(f"TASK_PROMPT{s}" for s in SETTING_SUFFIX.values()))]
    needed = [f"{ASSISTANT_MODULE}: {name}" for name in assistant_names if name not in assistant]
    needed += [f"{JUDGE_MODULE}: {name}" for name in JUDGE_TEMPLATES.values() if name not in judge]
    needed += [f"{script}: {USER_TEMPLATE_CLASS}.{attr}"
               for kind, script in (("SD", SD_SCRIPT), ("MD", MD_SCRIPT))
               for attr in USER_ATTRIBUTES if attr not in user[kind]]
    if needed:
        raise OfficialCodeError(
            f"{folder} does not look like the official PersonaLens code the kit knows: it lacks "
            f"{', '.join(needed[:6])}{' ...' if len(needed) > 6 else ''}; {WHERE_TO_GET}"
        )
    keep = {name: text for name, text in assistant.items() if name.startswith(FAMILIES)}
    return OfficialPrompts(folder, keep, {n: judge[n] for n in JUDGE_TEMPLATES.values()},
                           {kind: {a: group[a] for a in USER_ATTRIBUTES} for kind, group in user.items()})


@lru_cache(maxsize=4)
def _read_cached(folder: str, stamp: tuple[float, ...]) -> OfficialPrompts:
    return read_official_prompts(Path(folder))


def load_official_prompts(official_code: str | Path | None = None) -> OfficialPrompts:
    """The official templates from `official_code` (a clone of the authors' repository), else from
    where `paths.find_official_code` finds one; OfficialCodeError says what to do when there is none."""
    folder = find_official_code(official_code)
    if folder is None:
        given = f"{official_code} does not hold" if official_code else "found no copy of"
        raise OfficialCodeError(
            f"{given} the official PersonaLens code ({', '.join(OFFICIAL_CODE_FILES)}); {WHERE_TO_GET}"
        )
    stamp = tuple((folder / f).stat().st_mtime for f in OFFICIAL_CODE_FILES)
    return _read_cached(str(folder), stamp)


# -- filling the templates as the official scripts do -------------------------------------------------------


def _dash_lines(values: Mapping[str, Any]) -> str:
    """One "- key: value" line per field, in the given order."""
    return "\n".join(f"- {key}: {value}" for key, value in values.items())


def _preference_lines(values: Mapping[str, Any]) -> str:
    return "\n".join(f"- {key}: {', '.join(map(str, value)) if isinstance(value, list) else value}"
                     for key, value in values.items())


def preferences_text(
    preferences: Mapping[str, Mapping[str, Any]], task_type: str, domains: Sequence[str]
) -> str:
    """A single-domain task shows its first domain's preferences as lines; a multi-domain task puts
    each domain's name on a line of its own before its lines, each block between newlines."""
    if task_type == "SD":
        return _preference_lines(preferences[domains[0]])
    return "".join(f"\n{domain}:\n{_preference_lines(preferences[domain])}\n" for domain in domains)


def interactions_text(interactions: Mapping[str, str], task_type: str, domains: Sequence[str]) -> str:
    """A single-domain task shows its first domain's summary as it is; a multi-domain task wraps
    each domain's summary in a tag named after the domain."""
    if task_type == "SD":
        return interactions[domains[0]]
    return "".join(f"\n<{domain}>\n{interactions[domain]}\n</{domain}>\n" for domain in domains)


def bracketed_transcript(turns: Sequence[Mapping[str, str]]) -> str:
    """The user agent's and the judge's transcript: the role in capitals within brackets."""
    return "\n".join(f"[{t['role'].upper()}]: {t['content']}" for t in turns)


def named_transcript(turns: Sequence[Mapping[str, str]]) -> str:
    """The assistant's transcript: the role capitalised, then a colon."""
    return "\n".join(f"{t['role'].capitalize()}: {t['content']}" for t in turns)


@dataclass(frozen=True)
class Profile:
    """What the official scripts fill a prompt from, for one user and task, with the official labels."""

    task_type: str
    domains: Sequence[str]
    demographics: Mapping[str, str]
    """Without the user id (the dialogue scripts drop it)."""
    user_field: str
    """The profile's `user_id` value (e.g. "user7"); the judge script keeps it as the first field."""
    preferences: Mapping[str, Mapping[str, Any]]
    interactions: Mapping[str, str]
    situation: Mapping[str, str]
    """Keys as the official task files spell them ("Location", "Time of Day", ...)."""
    user_intent: str
    task_goal: str


def user_prompt(
    prompts: OfficialPrompts, profile: Profile, turns: Sequence[Mapping[str, str]]
) -> tuple[str, str]:
    """(system, message) of the user agent: the opening template when `turns` is empty."""
    group = prompts.user[profile.task_type]
    fields = _user_fields(profile)
    if turns:
        text = group["task_prompt"].format(**fields, message_history=bracketed_transcript(turns))
    else:
        text = group["task_prompt_initial_query"].format(**fields)
    return group["system_prompt"], text


def user_prompt_head(prompts: OfficialPrompts, profile: Profile, turns: Sequence[Mapping[str, str]]) -> int:
    """Characters of `user_prompt`'s message before the transcript: the profile part every later turn of
    the dialogue repeats word for word (0 for the opening message, which has no transcript)."""
    if not turns:
        return 0
    return history_head(prompts.user[profile.task_type]["task_prompt"], _user_fields(profile))


def _user_fields(profile: Profile) -> dict[str, str]:
    return {
        "task_description": profile.user_intent,
        "demographic_profile": _dash_lines(profile.demographics),
        "user_affinity": preferences_text(profile.preferences, profile.task_type, profile.domains),
        "interaction_summary": interactions_text(profile.interactions, profile.task_type, profile.domains),
        "situation_context": _dash_lines(profile.situation),
    }


_HISTORY_MARK = "\x00"


def history_head(template: str, fields: Mapping[str, str]) -> int:
    """Characters of `template` filled with `fields` before its `{message_history}` slot: the part a
    provider's prompt cache can hold across a dialogue's turns (0 when there is no slot)."""
    return max(template.format(**fields, message_history=_HISTORY_MARK).find(_HISTORY_MARK), 0)


def assistant_prompt(prompts: OfficialPrompts, profile: Profile, setting: str, family: str,
                     turns: Sequence[Mapping[str, str]]) -> tuple[str, str]:
    """(system, message) of the assistant in `setting`: the task template filled with the context
    parts the setting's flags give and the transcript so far."""
    system, template = prompts.assistant_templates(setting, family)
    fields = _assistant_fields(profile, setting)
    return system, template.format(**fields, message_history=named_transcript(turns))


def assistant_prompt_head(prompts: OfficialPrompts, profile: Profile, setting: str, family: str) -> int:
    """Characters of `assistant_prompt`'s message before the transcript: the context part (profile,
    past interactions, situation, as the setting gives) every turn of the dialogue repeats."""
    return history_head(prompts.assistant_templates(setting, family)[1], _assistant_fields(profile, setting))


def _assistant_fields(profile: Profile, setting: str) -> dict[str, str]:
    fields = {}
    if setting in ("base+D", "base+all"):
        fields["demographic_profile"] = _dash_lines(profile.demographics)
    if setting in ("base+I", "base+all"):
        fields["interaction_summary"] = interactions_text(profile.interactions, profile.task_type,
                                                          profile.domains)
    if setting in ("base+S", "base+all"):
        fields["situation_context"] = _dash_lines(profile.situation)
    return fields


def judge_prompt(prompts: OfficialPrompts, profile: Profile, dimension: str,
                 turns: Sequence[Mapping[str, str]]) -> str:
    """The judge's single message for `dimension` (a key of JUDGE_TEMPLATES); the judge has no system text."""
    template = prompts.judge[JUDGE_TEMPLATES[dimension]]
    conversation = bracketed_transcript(turns)
    if dimension == "task_completion":
        return template.format(conversation=conversation, goal=profile.task_goal)
    if dimension == "personalization":
        return template.format(
            demographic_profile=_dash_lines({"user_id": profile.user_field, **profile.demographics}),
            user_affinity=preferences_text(profile.preferences, profile.task_type, profile.domains),
            task_description=profile.user_intent,
            interaction_summary=interactions_text(profile.interactions, profile.task_type, profile.domains),
            situation_context=_dash_lines(profile.situation),
            conversation=conversation,
        )
    return template.format(conversation=conversation)
