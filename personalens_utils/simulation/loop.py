"""One simulated dialogue: the user agent opens, the assistant and the user alternate until the
user is done (TERMINATE) or the turn cap is reached.

A turn is one user message and the assistant's reply to it. When the user's message carries
TERMINATE, the word is removed and the assistant still answers that message once; that reply ends
the dialogue. The opening message cannot end the dialogue (a stray TERMINATE there is dropped).

With the official prompts (`prompt_set="official"`) the dialogue also runs by the official
scripts' rules, since they decide what the next prompt holds: a message ends the dialogue when it
contains the text TERMINATE anywhere, which is then deleted and the message stripped; other messages,
the opening one included, are kept as the model wrote them; a Llama or Mistral assistant's reply
loses its leading whitespace; and the cap counts assistant replies, so a capped dialogue ends with
the user's message after the last of them (`official_turns`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from personalens_utils.assistants import Assistant, assistant_on
from personalens_utils.engine import error_message
from personalens_utils.llm import Message, Response, Usage
from personalens_utils.prompts.dialogue import DIALOGUE_PROMPT_VERSION, TERMINATE
from personalens_utils.prompts.official import OfficialPrompts
from personalens_utils.records import KIT_PROMPTS, OFFICIAL_PROMPTS, Dialogue, resolved_model

from .prompting import ScenarioContext, assistant_family, assistant_request, user_request
from .settings import AssistantSetting

TURN_CAPS = {"SD": 20, "MD": 30}
"""At most this many turns per dialogue (paper, section 2.3)."""

TERMINATED, TURN_CAP, ERROR = "terminated", "turn_cap", "error"

_TERMINATE = re.compile(r"""[\s"'`*_\[(<{]*\b""" + TERMINATE + r"""\b[\s"'`*_\])>}.!]*""")


def split_terminate(text: str) -> tuple[str, bool]:
    """The message without the TERMINATE marker (and quotes or brackets around it); whether it had one."""
    cleaned, count = _TERMINATE.subn(" ", text)
    if not count:
        return text.strip(), False
    return re.sub(r"[ \t]{2,}", " ", cleaned).strip(), True


def split_terminate_official(text: str, opening: bool) -> tuple[str, bool]:
    """The official rule: any occurrence of TERMINATE (not in the opening message) ends the dialogue;
    the word is deleted and the message stripped. Other messages are kept as written."""
    if opening or TERMINATE not in text:
        return text, False
    return text.replace(TERMINATE, "").strip(), True


def kept_reply(text: str, official: bool, assistant_model: str) -> str:
    """The assistant's reply as the dialogue keeps it: stripped (kit); under the official rules as
    the official scripts keep it, a Claude reply as written, a Llama or Mistral one without leading
    whitespace."""
    if not official:
        return text.strip()
    return text if assistant_family(assistant_model) == "CLAUDE" else text.lstrip()


def prompt_identity(prompts: OfficialPrompts | None) -> tuple[str, str]:
    """(prompt set, prompt version) of dialogues made with `prompts` (None: the kit's)."""
    if prompts is None:
        return KIT_PROMPTS, DIALOGUE_PROMPT_VERSION
    return OFFICIAL_PROMPTS, prompts.version


def dialogue_id(scenario_id: str, user_model: str, assistant_model: str, setting: str, *, backend: str,
                assistant_backend: str | None = None, prompt_version: str = DIALOGUE_PROMPT_VERSION,
                prompt_set: str = KIT_PROMPTS, assistant_model_id: str | None = None) -> str:
    """The run-store id of a dialogue whose user agent runs on `backend` and assistant on
    `assistant_backend` (default: the same; docs/architecture.md): the models' ids are the ones each
    backend is called with (`assistant_model_id`: the assistant's own, `Assistant.model_id`);
    `prompt_set` says whose prompts made it."""
    assistant_backend = assistant_backend or backend
    user = (backend, resolved_model(user_model, backend))
    assistant = (assistant_backend, assistant_model_id or resolved_model(assistant_model, assistant_backend))
    names = (scenario_id, user_model, assistant_model, setting, prompt_version)
    return Dialogue.make_id(*names, user, assistant, prompt_set)


@dataclass
class _Books:
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    retries: int = 0
    backend: str = ""

    def add(self, response: Response) -> str:
        self.usage = self.usage + response.usage
        self.cost_usd += response.cost_usd
        self.retries += response.retries
        self.backend = response.backend
        return response.text


async def simulate_dialogue(
    client: Any,
    ctx: ScenarioContext,
    setting: AssistantSetting,
    *,
    user_model: str,
    assistant_model: str = "",
    max_turns: int | None = None,
    assistant: Assistant | None = None,
    prompts: OfficialPrompts | None = None,
) -> Dialogue:
    """Run one dialogue and return its run-store record: the user agent speaks through `client` (an
    `LLMClient`), the assistant is `assistant` (default: `assistant_model` on the same client); with
    `prompts` (the official templates), by the official prompts and rules.

    A call failing in the llm layer does not raise (except an authentication failure, see
    `engine.error_message`): the record comes back with status "error", the error message and the
    turns made so far. Any other exception is a bug and propagates.
    """
    scenario = ctx.scenario
    cap = max_turns if max_turns is not None else TURN_CAPS[scenario.task_type]
    turns: list[dict[str, str]] = []
    assistant = assistant or assistant_on(client, assistant_model)
    assistant_model = assistant.model
    backend = getattr(client, "backend_name", "")
    books = _Books(backend=assistant.backend)
    status, error = TURN_CAP, None
    official = prompts is not None
    try:
        for index in range(cap + 1 if official else cap):
            text = books.add(await client.acomplete(user_request(ctx, turns, user_model, prompts)))
            text, done = split_terminate_official(text, index == 0) if official else split_terminate(text)
            turns.append({"role": "user", "content": text})
            if official and index == cap and not done:
                break
            request = assistant_request(setting, ctx, turns, assistant_model, prompts)
            reply = books.add(await assistant.respond(request))
            turns.append({"role": "assistant", "content": kept_reply(reply, official, assistant_model)})
            if done and index > 0:
                status = TERMINATED
                break
    except Exception as exc:
        status, error = ERROR, error_message(exc)
    prompt_set, prompt_version = prompt_identity(prompts)
    return Dialogue(
        scenario_id=scenario.scenario_id,
        user_id=scenario.user_id,
        task_id=scenario.task_id,
        task_type=scenario.task_type,
        domains=tuple(scenario.domains),
        user_model=user_model,
        assistant_model=assistant_model,
        assistant_setting=setting.name,
        prompt_version=prompt_version,
        prompt_set=prompt_set,
        backend=assistant.backend or books.backend,
        user_backend=backend,
        user_model_id=resolved_model(user_model, backend),
        assistant_backend=assistant.backend,
        assistant_model_id=assistant.model_id,
        status=status,
        error=error,
        turns=tuple(Message(t["role"], t["content"]) for t in turns),  # type: ignore[arg-type]
        usage=books.usage,
        cost_usd=books.cost_usd,
        retries=books.retries,
    )
