"""One simulated dialogue: the user agent opens, the assistant and the user alternate until the
user is done (TERMINATE) or the turn cap is reached.

A turn is one user message and the assistant's reply to it. When the user's message carries
TERMINATE, the assistant still answers that message once; that reply ends the dialogue. The opening
message cannot end the dialogue. How TERMINATE is read, what is kept of a reply and how the cap
counts belong to the prompt set (`prompting`): the official set runs by the official scripts' rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from personalens_utils.engine import error_message
from personalens_utils.identity import resolved_model
from personalens_utils.llm import Message, Response, Usage
from personalens_utils.prompting import KIT, PromptSet, ScenarioContext
from personalens_utils.records import Dialogue

from .settings import AssistantSetting

TURN_CAPS = {"SD": 20, "MD": 30}
"""At most this many turns per dialogue (paper, section 2.3)."""

TERMINATED, TURN_CAP, ERROR = "terminated", "turn_cap", "error"


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
    assistant_model: str,
    max_turns: int | None = None,
    assistant_client: Any = None,
    prompts: PromptSet = KIT,
) -> Dialogue:
    """Run one dialogue and return its run-store record: the user agent speaks through `client` (an
    `LLMClient`), the assistant through `assistant_client` (default: the same client), both with the
    requests and by the rules of `prompts`.

    A call failing in the llm layer does not raise (except an authentication failure, see
    `engine.error_message`): the record comes back with status "error", the error message and the
    turns made so far. Any other exception is a bug and propagates.
    """
    scenario = ctx.scenario
    cap = max_turns if max_turns is not None else TURN_CAPS[scenario.task_type]
    turns: list[dict[str, str]] = []
    assistant_client = assistant_client or client
    backend = getattr(client, "backend_name", "")
    assistant_backend = getattr(assistant_client, "backend_name", "")
    books = _Books(backend=assistant_backend)
    status, error = TURN_CAP, None
    try:
        for index in range(prompts.user_messages(cap)):
            text = books.add(await client.acomplete(prompts.user_request(ctx, turns, user_model)))
            text, done = prompts.read_user_message(text, opening=index == 0)
            turns.append({"role": "user", "content": text})
            if index >= cap and not done:  # a set counting replies: the cap's last user message
                break
            request = prompts.assistant_request(setting, ctx, turns, assistant_model)
            reply = books.add(await assistant_client.acomplete(request))
            turns.append({"role": "assistant", "content": prompts.kept_reply(reply, assistant_model)})
            if done and index > 0:
                status = TERMINATED
                break
    except Exception as exc:
        status, error = ERROR, error_message(exc)
    return Dialogue(
        scenario_id=scenario.scenario_id,
        user_id=scenario.user_id,
        task_id=scenario.task_id,
        task_type=scenario.task_type,
        domains=tuple(scenario.domains),
        user_model=user_model,
        assistant_model=assistant_model,
        assistant_setting=setting.name,
        prompt_version=prompts.version,
        prompt_set=prompts.name,
        backend=assistant_backend or books.backend,
        user_backend=backend,
        user_model_id=resolved_model(user_model, backend),
        assistant_backend=assistant_backend,
        assistant_model_id=resolved_model(assistant_model, assistant_backend),
        status=status,
        error=error,
        turns=tuple(Message(t["role"], t["content"]) for t in turns),  # type: ignore[arg-type]
        usage=books.usage,
        cost_usd=books.cost_usd,
        retries=books.retries,
    )
