"""The failure reviewer's prompt, written for this kit: which party caused a dialogue's failure.

A dialogue that failed its task or scored low on personalization is shown to a reviewer (a model
other than the judge) with the user's profile, the task, the numbered conversation and the judge's
verdicts with their reasons. The reviewer names one party (the assistant, the user agent, the judge,
or nobody), the fault, and the message that shows it, in labelled lines a parser reads back
(`validity.blame`). Bump `REVIEW_PROMPT_VERSION` whenever the template changes: blame records are
keyed by it.

The head (instructions, the parties and faults, the profile and task) is the same for every call on
one scenario; the tail (conversation and verdicts) changes, so a provider can cache the head.
"""

from __future__ import annotations

REVIEW_PROMPT_VERSION = "v1"

PARTIES = ("assistant", "user_agent", "judge", "nobody")
"""Who a reviewer may blame, as the answer names them."""

FAULTS = {
    "assistant": ("ignored_user", "not_proactive", "left_unanswered"),
    "user_agent": ("ended_early", "withheld", "contradicted_profile", "answered_as_assistant", "looped"),
    "judge": ("score_contradicts_reason", "missed_evidence"),
    "nobody": ("none",),
}
"""The faults each party may be blamed for, as the answer names them."""

REVIEW_HEAD = """\
You are auditing a test of a personal ASSISTANT. A simulated USER AGENT played a user with the \
PROFILE below and talked to the assistant to get a TASK done; then a JUDGE scored the conversation. \
When the result is poor (the task judged not completed, or personalization judged low), decide which \
single party caused it; when it is not, or nobody misbehaved, answer nobody.

Parties and the faults you may name:
- assistant: ignored_user (the user stated a wish and the assistant never applied it), \
not_proactive (the assistant could have used what it knew but waited to be told), left_unanswered \
(the user's last request got no answer).
- user_agent: ended_early (it closed the conversation before saying what it wanted), withheld (it \
never revealed preferences of its profile that the task needs), contradicted_profile (it asked for \
something its profile rules out), answered_as_assistant (it spoke as the assistant), looped (it \
repeated itself without need).
- judge: score_contradicts_reason (the score says the opposite of the judge's own explanation), \
missed_evidence (what the judge says is missing is in the conversation).
- nobody: none (the poor result is what the conversation deserves and nobody misbehaved).

Rules:
- Blame the user agent or the judge only when the conversation or the verdict shows it; a weak \
assistant is the assistant's fault.
- Name the number of the message that shows the fault (as numbered below), or none.

Reply in exactly this form:
PARTY: <assistant, user_agent, judge or nobody>
FAULT: <one fault of that party>
TURN: <message number or none>
EXPLANATION: <one or two sentences>

USER PROFILE:
{demographics}

PREFERENCES:
{preferences}

SITUATION:
{situation}

TASK:
{task_description}
GOAL: {goal}
PREFERENCE TYPES THE TASK IS ABOUT: {relevant}

"""

REVIEW_TAIL = """\
CONVERSATION (it ended by: {ended}):
{conversation}

JUDGE'S VERDICTS:
{verdicts}
"""

REVIEW = REVIEW_HEAD + REVIEW_TAIL

NUMBERED_LINE = "[{number}] {speaker}: {content}"
VERDICT_LINE = "- {dimension}: {score} - {explanation}"

REVIEW_REMINDER = """\
Your answer could not be read: {problem}. Reply again with the four lines PARTY:, FAULT:, TURN: and \
EXPLANATION: in the requested form.
"""
