"""A person plays the user of a scenario: the widget over `validity.people.PersonDialogue`.

The person reads what the user agent is given (who they are, what they like, what they asked before,
where they are, what they want done; and the prompt itself, folded), types each message and sends it;
"End dialogue" sends the last message and ends the dialogue: the button is the person's end, where the
user agent writes TERMINATE, so a TERMINATE the person types is kept as a plain word. The assistant's
replies appear as they come (the cell waits for each). The finished dialogue is stored in the run store as an
ordinary record (user `human:<name>`), for notebook 04 to judge and the explorer to show.

Stable CSS classes, for browser tests (docs/explore.md): `pl-play`, `pl-play-brief`, `pl-play-chat`,
`pl-play-message` (the text box), `pl-play-send`, `pl-play-end`, `pl-play-status`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from personalens_utils.base.errors import KitError
from personalens_utils.explore.widgets import _FULL, _Page
from personalens_utils.llm import Request
from personalens_utils.outputs.display import chat_html, esc, inline
from personalens_utils.prompt_templates.render import render_fields, render_interactions, render_preferences
from personalens_utils.validity.people import PersonDialogue

BRIEF = (
    ("Who you are", "demographics", render_fields),
    ("What you like", "preferences", render_preferences),
    ("What you have asked the assistant for before", "interactions", render_interactions),
    ("Where you are right now", "situation", render_fields),
)
"""The parts of the user agent's request context the person reads, under the user prompt's headings."""


def brief_html(request: Request) -> str:
    """What the user agent is given for this scenario, from its request: the profile's parts, the task,
    and the prompt text itself (folded)."""
    context = request.context
    parts = [f"<h4>{esc(title)}</h4><div class=\"pl-explanation\">{esc(render(context.get(key) or {}))}</div>"
             for title, key, render in BRIEF]
    task = context.get("task") or {}
    parts.append(f"<h4>What you want to get done</h4><div class=\"pl-explanation\">"
                 f"{esc(task.get('user_intent', ''))}</div>")
    prompt = "\n\n".join([request.system or "", *(m.content for m in request.messages)]).strip()
    parts.append(f"<details><summary>The user agent's prompt</summary><div class=\"pl-explanation\">"
                 f"{esc(prompt)}</div></details>")
    return inline(f'<div class="pl-page pl-profile">{"".join(parts)}</div>')


class PlayUser(_Page):
    """A person types the user's turns of one scenario against an assistant; the dialogue is stored
    when it ends (by the person, or at the turn cap)."""

    def __init__(self, dialogue: PersonDialogue) -> None:
        self.dialogue = dialogue
        scenario = dialogue.ctx.scenario
        head = widgets.HTML(inline(
            f'<div class="pl-muted">You are <b>{esc(dialogue.person.model)}</b> playing the user of '
            f"<b>{esc(scenario.scenario_id)}</b> with the assistant <b>{esc(dialogue.assistant.model)}</b> "
            f"(setting {esc(dialogue.setting.name)}).</div>"))
        self.brief = widgets.HTML(brief_html(dialogue.request) if dialogue.request else "",
                                  layout=widgets.Layout(**_FULL))
        self.brief.add_class("pl-play-brief")
        self.page = widgets.HTML(layout=widgets.Layout(**_FULL))
        self.page.add_class("pl-play-chat")
        self.message = widgets.Textarea(placeholder="your message to the assistant", rows=3,
                                        layout=widgets.Layout(**_FULL))
        self.message.add_class("pl-play-message")
        self.send = widgets.Button(description="Send", button_style="primary",
                                   layout=widgets.Layout(width="auto"))
        self.send.add_class("pl-play-send")
        self.finish = widgets.Button(description="End dialogue", layout=widgets.Layout(width="auto"),
                                     tooltip="send this last message (may be empty) and end the dialogue")
        self.finish.add_class("pl-play-end")
        self.status = widgets.HTML()
        self.status.add_class("pl-play-status")
        buttons = widgets.HBox([self.send, self.finish, self.status],
                               layout=widgets.Layout(flex_flow="row wrap", **_FULL))
        super().__init__([head, self.brief, self.page, self.message, buttons], layout=widgets.Layout(**_FULL))
        self.add_class("pl-play")
        self.send.on_click(lambda _: self._act(self.dialogue.say))
        self.finish.on_click(lambda _: self._act(self.dialogue.end))
        self._show()

    def _act(self, act: Callable[[str], Any]) -> None:
        """Hand the typed text to the dialogue and wait for the reply; a refusal is shown, the text kept."""
        self.send.disabled = self.finish.disabled = True
        self.status.value = esc("waiting for the assistant...")
        try:
            act(self.message.value)
        except KitError as exc:
            self.status.value = inline(f'<span class="pl-error">{esc(exc)}</span>')
            return
        finally:
            self._enable()
        self.message.value = ""
        self._show()

    def _enable(self) -> None:
        over = self.dialogue.done or self.dialogue.failure is not None
        self.send.disabled = over
        self.finish.disabled = over or self.dialogue.opening
        self.message.disabled = over

    def _show(self) -> None:
        self.page.value = chat_html((t["role"], t["content"]) for t in self.dialogue.turns)
        record = self.dialogue.record
        if record is None:
            turn = sum(t["role"] == "user" for t in self.dialogue.turns) + 1
            opening = " (the opening one)" if turn == 1 else ""
            self.status.value = esc(f"turn {turn}: your message{opening}")
        else:
            how = {"terminated": "you ended it", "turn_cap": "the turn cap was reached"}.get(record.status,
                                                                                            record.status)
            self.status.value = inline(
                f'<span>Stored dialogue <b>{esc(record.id)}</b> ({how}, {record.n_turns} turns) in '
                f"{esc(self.dialogue.store.root)}: judge it with notebook 04, read it with explore().</span>"
                + (f' <span class="pl-error">{esc(record.error)}</span>' if record.error else ""))
        self._enable()
