"""Prompts of the judge agent, one per dimension family, written for this kit.

They follow the paper's judge (Appendix B, Figures 16-20) in what is asked and in the answer
labels a parser reads back (`VERDICT:`/`EXPLANATION:`, `Personalization Score:`, `Naturalness
Score:`, `Coherence Score:`), so answers from any model and from the offline backend share one
format. Bump `JUDGE_PROMPT_VERSION` whenever a template changes: judgments are keyed by it.

Each template is a stable head (instructions, scale, the user's profile: the same for every call on
one dimension and profile) followed by a changing tail (the conversation, the turn, the reply form),
so a provider's prompt cache can serve the head (docs/scale.md). `<NAME>_HEAD + <NAME>_TAIL` is the
whole template `<NAME>`.
"""

from __future__ import annotations

JUDGE_PROMPT_VERSION = "v2"
"""v2: v1's wording, reordered so that nothing that changes from call to call comes before the profile."""

TASK_COMPLETION_HEAD = """\
You are reviewing a CONVERSATION in which a USER asked an ASSISTANT for help. Decide whether the \
conversation reached the user's GOAL.

Terms:
- GOAL: what the user set out to get done; it is met only if every part of it is met.
- CONVERSATION: the user's messages and the assistant's replies, in order.

How to decide:
- Judge only from what the conversation shows. If a part of the GOAL depends on something the \
conversation never contains (a booking never confirmed, an item never chosen), the GOAL is not met.
- Answer with a boolean VERDICT (True if every part of the GOAL is met, otherwise False), then a \
line starting with EXPLANATION: that says briefly why.

Reply in exactly this form:
VERDICT: <True or False>
EXPLANATION: <one or two sentences>

"""

TASK_COMPLETION_TAIL = """\
CONVERSATION:
{conversation}

GOAL:
{goal}
"""

TASK_COMPLETION = TASK_COMPLETION_HEAD + TASK_COMPLETION_TAIL

PERSONALIZATION_LEVELS = """\
1 - POOR: no real personalization.
  - Preferences the assistant could have known from past interactions are not used.
  - It asks for things that were already settled before (for example the usual alarm time or \
sound).
  - It goes against established preferences or the user's history.
  - Nothing learned earlier shapes the conversation.
2 - BASIC: personalization only on request.
  - Preferences are honoured only after the user states them in this conversation.
  - The user has to repeat preferences that past interactions already established.
  - Implicit preferences go unnoticed unless spelled out.
  - Small adjustments follow what the user says now, but nothing is offered proactively.
3 - STRONG: proactive personalization.
  - Known preferences from past interactions are applied without the user having to ask.
  - It may still check minor details or let the user change something.
  - Implicit preferences are picked up.
  - The user stays in control while the assistant shows what it knows.
  - Suggestions fit the context.
4 - EXCEPTIONAL: personalization that anticipates.
  - Needs are anticipated from explicit and implicit preferences alike.
  - Habits and patterns are understood and used to prepare for what comes next.
  - Beyond stated preferences, the current context and the user's habits drive well-judged \
suggestions.
"""

PERSONALIZATION_HEAD = """\
Rate how well the ASSISTANT in the conversation below personalizes its help: how it learns from, \
remembers and proactively applies the USER's preferences and patterns.

Definitions:
- Score: an integer from 1 (poor) to 4 (exceptional).
- Demographic profile: who the user is.
- User preferences: the user's preferences in the domains of this task.
- Explicit preferences: preferences the user states in the conversation.
- Implicit preferences: preferences that follow from habits, past interactions, context or behaviour.
- User agency: how far the user keeps the decisions and the direction of the conversation.
- Past interaction summary: what happened in the user's earlier sessions in these domains.
- Current situation: where the user is and what is going on right now.

Weigh four criteria:
- Proactive learning: does the assistant build on what past interactions reveal?
- Preference application: does it apply the user's preferences before being told?
- Contextual awareness: does it adapt to the user's current situation?
- User agency: does the user stay in control while the assistant personalizes?

Score levels:
{levels}
Context:
Demographic profile:
{demographics}

User preferences:
{preferences}

Task description:
{task_description}

Past interaction summary:
{interactions}

Current situation:
{situation}

"""
"""Shared by dialogue-level and turn-level personalization, so their calls share one cached head."""

PERSONALIZATION_TAIL = """\
Conversation:
{conversation}

Reply inside <response></response> tags, with no preamble, in this form:
<response>
Personalization Score: <1-4>
Key Observations: <what the assistant did or failed to do>
Justification: <why this score, criterion by criterion>
Improvement Suggestions: <how the assistant could have personalized better>
</response>
"""

TURN_PERSONALIZATION_TAIL = """\
The conversation below stops right after assistant turn {turn} of a longer dialogue. Rate how well \
the ASSISTANT has personalized its help so far, judging only the turns shown.

Conversation:
{conversation}

Reply inside <response></response> tags, with no preamble, in this form:
<response>
Personalization Score: <1-4>
Justification: <why this score for the conversation so far>
</response>
"""

PERSONALIZATION = PERSONALIZATION_HEAD + PERSONALIZATION_TAIL
TURN_PERSONALIZATION = PERSONALIZATION_HEAD + TURN_PERSONALIZATION_TAIL

NATURALNESS_HEAD = """\
Rate how natural the {speaker_upper}'s messages in the conversation below are: how much they read \
like a person talking rather than a machine. Judge only the {speaker}'s messages; the other side is \
there for context.

Use whole numbers from 1 to 5:
1 - very unnatural; nothing like human conversation
2 - clearly unnatural in several respects
3 - fairly natural, with noticeable unnatural parts
4 - mostly natural, with small unnatural touches
5 - fully natural; reads like a person

"""

NATURALNESS_TAIL = """\
Conversation:
{conversation}

Reply inside <response></response> tags, with no preamble, in this form:
<response>
Naturalness Score: <1-5>
Justification: <why this score>
</response>
"""

NATURALNESS = NATURALNESS_HEAD + NATURALNESS_TAIL

COHERENCE_HEAD = """\
Rate how coherent the {speaker_upper}'s messages in the conversation below are: how logically each \
one follows from what was said before it and how relevant and clear it is. Judge only the \
{speaker}'s messages; the other side is there for context.

Use whole numbers from 1 to 5:
1 - very incoherent; no logical link or relevance to the conversation
2 - largely incoherent; several problems of logic or relevance
3 - fairly coherent, with noticeable problems of logic or relevance
4 - mostly coherent, with small lapses of logic, relevance or clarity
5 - fully coherent: logical, relevant and clear throughout

"""

COHERENCE_TAIL = """\
Conversation:
{conversation}

Reply inside <response></response> tags, with no preamble, in this form:
<response>
Coherence Score: <1-5>
Justification: <why this score>
</response>
"""

COHERENCE = COHERENCE_HEAD + COHERENCE_TAIL

RETRY_REMINDER = """\
Your answer could not be read: it must contain exactly one line of the form "{label} {form}". \
Reply again in the requested format.
"""
