"""The explorer's pages as HTML: one dialogue, or two dialogues of one scenario side by side.

Each page is one self-contained string, every style written inline (`display.inline`), so it shows
the same in a live widget and in an executed copy opened without a kernel. Stable CSS classes for
tests and browser checks: `pl-page` (a dialogue page), `pl-compare` (side by side), `pl-profile`,
`pl-relevant`, `pl-chat`, `pl-turn` (with `pl-turn-user` / `pl-turn-assistant` and `data-turn`),
`pl-turn-score`, `pl-judgment` (with `data-dimension`), `pl-explanation`, `pl-ended` (docs/explore.md).
Dimensions show by the names the tables print (`DIMENSION_NAMES`), their ids in `data-dimension` and
on hover.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from personalens_utils.explore.catalog import Catalog, DialogueView
from personalens_utils.judging import ALL_DIMENSIONS
from personalens_utils.llm.offline import answered_by
from personalens_utils.measures.display import DIMENSION_NAMES
from personalens_utils.outputs.display import cell, chat_html, esc, fields_html, inline
from personalens_utils.runstore.records import Dialogue, Judgment

_NOT_APPLIED = '<span class="pl-muted">not applied</span>'
_JUDGMENTS = ('<h4>Judgments</h4><div class="pl-muted">(U) rates the user agent\'s turns, (A) the '
              "assistant's.</div>")
_FIT = ' class="pl-fit-cell"'
"""A cell of a table that fits its width: its words wrap, a word too long for it breaks."""
_TURN_NOTE = re.compile(r"^turn (\d+): ", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")


def turn_notes(judgment: Judgment) -> dict[int, str]:
    """A turn-level judgment's explanation split by assistant turn (1-based), as `judging.answers`
    writes it ("turn k: ..." lines)."""
    text = judgment.explanation
    marks = list(_TURN_NOTE.finditer(text))
    return {
        int(m.group(1)): text[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)].strip()
        for i, m in enumerate(marks)
    }


def _single_spaced(text: str) -> str:
    """Blank lines between a judge's paragraphs dropped: the page keeps line breaks as they are."""
    return _BLANK_LINES.sub("\n", text.strip())


def dimension_name(dimension: str) -> str:
    """A dimension as the tables name it ("Naturalness (A)"), an unknown one by its id."""
    return DIMENSION_NAMES.get(dimension, dimension)


def _named(dimension: str) -> str:
    """A dimension's name in bold, its id on hover."""
    return f'<b title="{esc(dimension)}">{esc(dimension_name(dimension))}</b>'


def _asked_again(judgment: Judgment) -> str:
    """Said only when the judge was asked a second time because its first answer held no readable
    score (the format reminder); a turn-level judgment asks once per turn, which is nothing to say."""
    asked = 1 if judgment.turn_scores is None else len(judgment.turn_scores)
    again = judgment.attempts - asked
    if again <= 0:
        return ""
    where = "" if judgment.turn_scores is None else f" on {again} of {asked} turns"
    return f" · asked again{where}: the first answer had no readable score"


def _score(judgment: Judgment) -> str:
    if judgment.score is None:
        return "no score"
    if judgment.dimension == "task_completion":
        return "completed" if judgment.score == 1 else "not completed"
    return cell(judgment.score, 2 if judgment.turn_scores is not None else 0)


def judgment_html(judgment: Judgment, *, turns_beside: bool = False) -> str:
    """One judgment: dimension, score, parse status, judge, the full explanation, the raw answer folded.

    With `turns_beside` a turn-level judgment's per-turn notes are left to the transcript.
    """
    status = {"ok": "scored", "missing": "no valid score (missing)", "error": "call failed (error)"}
    explanation = _single_spaced(judgment.explanation)
    if judgment.turn_scores is not None:
        scores = ", ".join(cell(s, 0) or "–" for s in judgment.turn_scores)
        explanation = f"turn scores: {scores}" + ("" if turns_beside else "\n" + explanation)
    return (
        f'<div class="pl-judgment" data-dimension="{esc(judgment.dimension)}" '
        f'data-status="{esc(judgment.status)}">'
        f'{_named(judgment.dimension)}: <span class="pl-score">{esc(_score(judgment))}</span> '
        f'<span class="pl-muted">· {esc(status.get(judgment.status, judgment.status))}'
        f"{esc(_asked_again(judgment))} · judge {esc(judgment.judge_model)} "
        f"({esc(answered_by(judgment.backend, judgment.judge_model_id))}) · prompts "
        f"{esc(judgment.variant.label)}</span>"
        f'<div class="pl-explanation">{esc(explanation)}</div>'
        f'<details><summary>raw answer</summary><div class="pl-explanation pl-muted">{esc(judgment.raw)}'
        "</div></details></div>"
    )


def _turn_extras(dialogue: Dialogue, judgments: Sequence[Judgment]) -> dict[int, str]:
    """HTML beside each assistant message: its turn-level score and note from every turn-level judgment."""
    assistant_at = [i for i, t in enumerate(dialogue.turns) if t.role == "assistant"]
    extra: dict[int, list[str]] = defaultdict(list)
    for judgment in judgments:
        if judgment.turn_scores is None:
            continue
        notes = turn_notes(judgment)
        first: dict[str, int] = {}
        for k, (index, score) in enumerate(zip(assistant_at, judgment.turn_scores, strict=False), start=1):
            note = _single_spaced(notes.get(k, ""))
            seen = first.setdefault(note, k)
            shown = f"the same note as turn {seen}" if note and seen != k else note  # each note written once
            extra[index].append(
                f'<div class="pl-turn-score" data-turn-score="{k}">{_named(judgment.dimension)} '
                f"({esc(judgment.judge_model)}): {esc(cell(score, 0) or 'no score')}"
                f'<div class="pl-explanation pl-muted">{esc(shown)}</div></div>'
            )
    return {index: "".join(parts) for index, parts in extra.items()}


def _applied(view: DialogueView) -> dict[int, list[str]]:
    """Each message's badges, each once: a value the user holds in two domains (a price range for
    travel and for restaurants) is one mention per domain but one badge."""
    notes: dict[int, list[str]] = defaultdict(list)
    for m in view.mentions:
        note = f"{'applies' if m.role == 'assistant' else 'states'} {m.preference}: {m.value}"
        if note not in notes[m.index]:
            notes[m.index].append(note)
    return notes


def _values(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _applied_turns(view: DialogueView) -> dict[tuple[str, str, str], list[int]]:
    """(preference, domain, value) -> the turn numbers where the assistant's message holds the value."""
    used: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    numbers = _turn_numbers(view.dialogue)
    for m in view.mentions:
        if m.role == "assistant" and numbers[m.index] not in used[(m.preference, m.domain, m.value)]:
            used[(m.preference, m.domain, m.value)].append(numbers[m.index])
    return used


def profile_html(view: DialogueView, *, compared: Sequence[tuple[str, DialogueView]] = ()) -> str:
    """The task, the user's relevant preferences and where the assistant applied them, the rest folded.

    `compared` gives one "applied" column per (label, dialogue) of the same scenario instead of one.
    """
    if view.context is None:
        return f'<div class="pl-profile pl-muted">Profile not shown: {esc(view.problem)}</div>'
    ctx = view.context
    task = ctx.get("task") or {}
    relevant = list(task.get("relevant_preferences") or ())
    prefs: Mapping[str, Mapping[str, Any]] = ctx.get("preferences") or {}
    sides = list(compared) or [("by the assistant", view)]
    used = [_applied_turns(side) for _, side in sides]
    rows = []
    for name in relevant:
        for domain, by_type in prefs.items():
            if name not in by_type:
                continue
            value = by_type[name]
            items = value if isinstance(value, list | tuple) else [value]
            applied = ""
            for turns in used:
                where = "<br>".join(
                    esc(f"{item}: turn {', '.join(map(str, turns[(name, domain, str(item))]))}")
                    for item in items
                    if turns.get((name, domain, str(item)))
                )
                applied += f"<td{_FIT}>{where or _NOT_APPLIED}</td>"
            rows.append(f'<tr><td{_FIT}>{esc(name)}<div class="pl-muted">{esc(domain)}</div></td>'
                        f"<td{_FIT}>{esc(_values(value))}</td>{applied}</tr>")
    heads = "".join(f"<th{_FIT}>applied {esc(label)} (whole-word match)</th>" for label, _ in sides)
    relevant_html = (
        f'<table class="pl-table pl-fit pl-relevant"><thead><tr><th{_FIT}>relevant preference (domain)</th>'
        f"<th{_FIT}>user's value</th>{heads}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<div class="pl-muted">The task names no relevant preference the user has a value for.</div>'
    )
    every = {f"{d} · {k}": _values(v) for d, by in prefs.items() for k, v in by.items()}
    return (
        f'<div class="pl-profile"><div><b>Task</b> ({esc(task.get("task_type"))}, '
        f"{esc(', '.join(task.get('domains') or ()))}): {esc(task.get('task_description'))}</div>"
        f"<div><b>Goal</b>: {esc(task.get('task_goal'))}</div>"
        f"{relevant_html}"
        f"<details><summary>demographics and situation</summary>{fields_html(ctx.get('demographics') or {})}"
        f"{fields_html(ctx.get('situation') or {})}</details>"
        f"<details><summary>every preference of the task's domains</summary>{fields_html(every)}</details>"
        f"<details><summary>past interactions</summary>{fields_html(ctx.get('interactions') or {})}</details>"
        "</div>"
    )


def _turn_numbers(dialogue: Dialogue) -> list[int]:
    numbers, n = [], 0
    for t in dialogue.turns:
        n += t.role == "user"
        numbers.append(n)
    return numbers


def header_html(dialogue: Dialogue) -> str:
    """Who and what: scenario, assistant and user agent with their backends and model ids, prompts."""
    fields = {
        "scenario": dialogue.scenario_id,
        "assistant": f"{dialogue.assistant_model} "
        f"({answered_by(dialogue.assistant_backend, dialogue.assistant_model_id)})",
        "setting": dialogue.assistant_setting,
        "prompts": dialogue.variant.label,
        "user agent": f"{dialogue.user_model} ({answered_by(dialogue.user_backend, dialogue.user_model_id)})",
        "status": dialogue.status + (f": {dialogue.error}" if dialogue.error else ""),
        "turns": dialogue.n_turns,
        "dialogue id": dialogue.id,
    }
    return fields_html(fields)


def dialogue_page(view: DialogueView) -> str:
    """Everything about one dialogue: who and what, the profile, the transcript with applied
    preferences and turn-level scores beside their turns, then every judgment in full."""
    d = view.dialogue
    transcript = chat_html(
        ((t.role, t.content) for t in d.turns), notes=_applied(view), extra=_turn_extras(d, view.judgments)
    )
    judged = "".join(judgment_html(j, turns_beside=True) for j in view.judgments) or (
        '<div class="pl-muted">Not judged yet (notebook 04).</div>'
    )
    return inline(
        f'<div class="pl-page" data-dialogue="{esc(d.id)}">'
        f"<h4>{esc(Catalog.label(d))}</h4>{header_html(d)}{profile_html(view)}"
        f"<h4>Transcript</h4>{transcript}{_JUDGMENTS}{judged}</div>"
    )


def _by_turn(dialogue: Dialogue, extras: Mapping[int, str], notes: Mapping[int, list[str]]) -> dict[int, str]:
    """Each turn number's messages (user message k and the reply to it) as chat HTML."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, number in enumerate(_turn_numbers(dialogue)):
        groups[number].append(index)
    out = {}
    for number, indices in groups.items():
        out[number] = chat_html(
            [(dialogue.turns[i].role, dialogue.turns[i].content) for i in indices],
            notes={k: notes.get(i, []) for k, i in enumerate(indices)},
            extra={k: extras.get(i, "") for k, i in enumerate(indices)},
            start=max(number - 1, 0),
        )
    return out


def comparison_page(left: DialogueView, right: DialogueView) -> str:
    """One scenario under two settings or assistants: transcripts aligned turn by turn, then each
    dimension's scores and explanations beside each other."""
    a, b = left.dialogue, right.dialogue
    turns_a = _by_turn(a, _turn_extras(a, left.judgments), _applied(left))
    turns_b = _by_turn(b, _turn_extras(b, right.judgments), _applied(right))
    rows = [
        f'<div class="pl-compare-turn pl-side-cell" data-turn="{n}">{_turn_cell(turns_a, a, n)}</div>'
        f'<div class="pl-compare-turn pl-side-cell" data-turn="{n}">{_turn_cell(turns_b, b, n)}</div>'
        for n in sorted(set(turns_a) | set(turns_b))
    ]
    by_dim_a = {(j.dimension, j.judge_model): j for j in left.judgments}
    by_dim_b = {(j.dimension, j.judge_model): j for j in right.judgments}
    keys = sorted(set(by_dim_a) | set(by_dim_b), key=lambda k: (_order(k[0]), k[0], k[1]))
    judged = []
    for key in keys:
        cells = [
            judgment_html(side[key], turns_beside=True)
            if key in side
            else f'<div class="pl-muted">{esc(dimension_name(key[0]))} ({esc(key[1])}): not judged</div>'
            for side in (by_dim_a, by_dim_b)
        ]
        judged.append(f'<div class="pl-side-cell">{cells[0]}</div><div class="pl-side-cell">{cells[1]}</div>')
    head = "".join(
        f'<div class="pl-side-cell"><h4>{esc(d.assistant_model)} · {esc(d.assistant_setting)}</h4>'
        f"{header_html(d)}</div>"
        for d in (a, b)
    )
    profile = profile_html(left, compared=[(f"in {_run(a)}", left), (f"in {_run(b)}", right)])
    return inline(
        f'<div class="pl-compare" data-scenario="{esc(a.scenario_id)}">'
        f"<h4>{esc(a.scenario_id)}: side by side</h4>{profile}"
        f'<div class="pl-side">{head}{"".join(rows)}</div>{_JUDGMENTS}'
        f'<div class="pl-side">{"".join(judged)}</div></div>'
    )


def _turn_cell(turns: Mapping[int, str], dialogue: Dialogue, number: int) -> str:
    """One side's cell of a turn row; past that dialogue's last turn it says where it ended, so a
    blank cell is never read as a missing or unloaded message."""
    if number in turns:
        return turns[number]
    if number > dialogue.n_turns:
        return f'<div class="pl-muted pl-ended">ended at turn {dialogue.n_turns}</div>'
    return ""


def _run(dialogue: Dialogue) -> str:
    return f"{dialogue.assistant_model} · {dialogue.assistant_setting}"


def _order(dimension: str) -> int:
    return ALL_DIMENSIONS.index(dimension) if dimension in ALL_DIMENSIONS else len(ALL_DIMENSIONS)
