"""One simulated dialogue: the user agent opens, the assistant and the user alternate until the
user is done (TERMINATE) or the turn cap is reached.

A turn is one user message and the assistant's reply to it. When the user's message carries
TERMINATE, the assistant still answers that message once; that reply ends the dialogue. The opening
message cannot end the dialogue. How TERMINATE is read, what is kept of a reply and how the cap
counts belong to the prompt set (`prompt_sets`): the official set runs by the official scripts' rules.

A user role whose end is not a word in its text (a person, who ends with a button: `validity.people`)
answers with an `EndFlagged` response: its text is kept as it stands, TERMINATE included, and only its
`ends` flag ends the dialogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from personalens_utils.assistants import Assistant, assistant_on
from personalens_utils.base.stored import BackendName
from personalens_utils.llm import Message, Response, Usage
from personalens_utils.llm.role import Role
from personalens_utils.prompt_sets import KIT, PromptSet, ScenarioContext, in_style
from personalens_utils.prompt_templates.user_styles import UserAgent
from personalens_utils.runstore.engine import error_message
from personalens_utils.runstore.records import Dialogue
from personalens_utils.simulation.settings import AssistantSetting

TURN_CAPS = {"SD": 20, "MD": 30}
"""At most this many turns per dialogue (paper, section 2.3)."""

TERMINATED, TURN_CAP, ERROR = "terminated", "turn_cap", "error"


@dataclass(frozen=True)
class EndFlagged(Response):
    """A user message that says outright whether it ends the dialogue, so no marker is read from (or
    cut out of) its text: a person may write TERMINATE as a plain word."""

    ends: bool = False


@dataclass
class _Books:
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    retries: int = 0
    cut_off: int = 0
    """Replies that stopped at the token limit: kept as they came, counted so a reader can tell."""
    backend: BackendName = ""

    def add(self, response: Response) -> str:
        self.usage = self.usage + response.usage
        self.cost_usd += response.cost_usd
        self.retries += response.retries
        self.cut_off += response.cut_off
        self.backend = response.backend
        return response.text


async def simulate_dialogue(
    client: Any,
    ctx: ScenarioContext,
    setting: AssistantSetting,
    *,
    user_model: str | UserAgent,
    assistant: Assistant | str = "",
    max_turns: int | None = None,
    prompts: PromptSet = KIT,
    sample: int = 0,
) -> Dialogue:
    """Run one dialogue and return its run-store record: the user agent speaks through `client` (an
    `LLMClient`), the assistant is `assistant` (an `Assistant`, or a model's name: that model on the
    same client), both with the requests and by the rules of `prompt_templates`; every call carries `sample`,
    which of a run's independent repetitions this dialogue is (`SimulationConfig.repeats`). `user_model` is
the user agent's model, or a `UserAgent` naming the style it plays as well (`prompt_sets.in_style`;
a bare model plays cooperative), which the record keeps.

    A call failing in the llm layer does not raise (except an authentication failure, see
    `engine.error_message`): the record comes back with status "error", the error message and the
    turns made so far. Any other exception is a bug and propagates.
    """
    agent = user_model if isinstance(user_model, UserAgent) else UserAgent(user_model)
    user_model, user_style = agent.model, agent.style
    scenario = ctx.scenario
    cap = max_turns if max_turns is not None else TURN_CAPS[scenario.task_type]
    turns: list[dict[str, str]] = []
    if isinstance(assistant, str):
        assistant = assistant_on(client, assistant)
    assistant_model = assistant.model
    backend = getattr(client, "backend_name", "")
    user = Role.of(user_model, backend, getattr(client, "endpoint", ""))
    books = _Books(backend=assistant.backend)
    status, error = TURN_CAP, None
    try:
        for index in range(prompts.user_messages(cap)):
            request = in_style(prompts.user_request(ctx, turns, user_model), user_style)
            request = replace(request, sample=sample)
            said = await client.acomplete(request)
            text = books.add(said)
            if isinstance(said, EndFlagged):
                done = said.ends and index > 0  # the opening message cannot end it either
            else:
                text, done = prompts.read_user_message(text, opening=index == 0)
            turns.append({"role": "user", "content": text})
            if index >= cap and not done:  # a set counting replies: the cap's last user message
                break
            request = replace(prompts.assistant_request(setting, ctx, turns, assistant_model), sample=sample)
            reply = books.add(await assistant.respond(request))
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
        variant=prompts.variant(sample),
        backend=assistant.backend or books.backend,
        user_backend=backend,
        user_model_id=user.model_id,
        user_style=user_style,
        assistant_backend=assistant.backend,
        assistant_model_id=assistant.model_id,
        status=status,
        error=error,
        turns=tuple(Message(t["role"], t["content"]) for t in turns),  # type: ignore[arg-type]
        usage=books.usage,
        cost_usd=books.cost_usd,
        retries=books.retries,
        cut_off=books.cut_off,
    )
