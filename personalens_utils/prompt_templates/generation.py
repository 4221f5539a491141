"""Prompts of benchmark generation (paper §2.1-2.2, Appendix A.1-A.2), written for this kit.

They ask for what the paper's Figures 6, 7, 9, 10 and 11 ask for, but every answer comes back in a
fixed machine-readable shape (a JSON object or array; multi-domain tasks inside <response> tags)
so one parser reads answers from any model and from the offline backend. Unlike the paper's
preference prompt, categorical answers must come from the listed options: the schema is the
benchmark's contract and an answer outside it is rejected and asked again. Bump
`GENERATION_PROMPT_VERSION` whenever a template changes: generated records are keyed by it.
"""

from __future__ import annotations

GENERATION_PROMPT_VERSION = "v1"

PROFILE_SYSTEM = """\
You write realistic, varied user profiles that are used to test how well virtual assistants \
personalize. Each profile must read like one particular person: consistent with their \
demographics, but with individual and sometimes surprising tastes. Avoid stereotypes and avoid \
giving every person the same popular answers. Follow the requested output format exactly and \
add nothing else."""

PREFERENCES = """\
Write the personal preferences of the person below in the {domain} domain ({domain_description}).

Rules:
- For a CATEGORICAL preference, choose from its listed options only, copying each option exactly. \
Choose exactly one option when the preference says "one", and one or more when it says \
"one or more".
- For an OPEN preference there is no list: write concrete answers of your own (names, places, \
titles) that fit this person. Give one answer when it says "one" and a list of one or more \
answers when it says "one or more".
- Cover every preference listed, and no others.
- Output one JSON object and nothing else. Its keys are the preference names exactly as written \
below; a "one" answer is a JSON string and a "one or more" answer is a JSON array of strings.

Example of the shape (for an unrelated domain):
{{"Preferred Roast": "medium", "Favourite Cafes": ["a corner café near the office"]}}

Demographic profile:
{demographics}

Preferences in the {domain} domain:
{preference_types}

Output:"""

MASK = """\
Decide which of the domains below the person would actually use a virtual assistant for. Most \
people use many of them but rarely all; let age, work, family situation and where the person \
lives decide which ones they skip.

Output one JSON object and nothing else: every domain name below as a key, exactly as written, \
with the value 1 (uses the assistant for it) or 0 (does not).

Demographic profile:
{demographics}

Domains:
{domains}

Output:"""

INTERACTIONS = """\
Write a summary of this person's past conversations with a virtual assistant in the {domain} \
domain. The summary is used to test whether an assistant can personalize from history, so it \
must be specific enough to act on.

The summary should:
1. read as a short narrative of real past exchanges in this domain only;
2. show recurring themes, favourite topics and lasting interests;
3. show how the person's use and tastes changed over time;
4. mention the kinds of interaction (questions, requests, feedback) and how often or when they \
happen;
5. fit the demographic profile and stay plausible;
6. convey the person's tone and way of talking to the assistant.

Write plain text (one to three paragraphs, no headings, no lists) and nothing else.

Demographic profile:
{demographics}

Preferences in the {domain} domain:
{preferences}

Interaction summary:"""

SD_TASKS = """\
Write {n_tasks} tasks for conversations between a user and a virtual assistant in the {domain} \
domain ({domain_description}). A task is a general request many different users could make, \
with room to tailor the help to each user's preferences.

For each task give:
- "task_description": the scenario in the third person ("The user wants ..."), including what \
the assistant should do;
- "user_intent": what the user sets out to do, addressed to the user in the second person \
("You want to ..."); it opens the conversation;
- "task_goal": a clear, checkable outcome that marks success;
- "relevant_preference_types": the preference types below that the assistant could use to \
personalize this task (one or more, names copied exactly).

The tasks should differ from each other, be goal-driven, describe scenarios broadly enough for \
users with different preferences, and together use many of the preference types.

Preference types in the {domain} domain:
{preference_types}

Output a JSON array of {n_tasks} objects with exactly those four keys, and nothing else."""

MD_TASKS = """\
Write {n_tasks} tasks for conversations in which a user needs a virtual assistant's help across \
several domains at once (for example a trip that needs a flight, a hotel and a rental car).

Domain data (each domain, what it covers, and its preference types):
{domain_data}

For each task give:
- "task_description": the scenario in the third person, making clear that it spans several \
domains;
- "user_intent": what the user sets out to do, addressed to the user in the second person \
("You want to ..."); it opens the conversation;
- "task_goal": a clear, checkable outcome that marks success;
- "relevant_domains": the {min_domains} to {max_domains} domains the task involves, names \
copied exactly;
- "relevant_preference_types": preference types of those domains that the assistant could use \
to personalize the task, names copied exactly.

Each task must span {min_domains} to {max_domains} domains, be goal-driven, describe its \
scenario broadly enough for users with different preferences, and use preference types from \
several of its domains. Vary the domain combinations across tasks.
{earlier}
Reply at once, without preamble: a JSON array of {n_tasks} objects with exactly those five \
keys, enclosed in <response></response> tags."""

SITUATION = """\
Complete the situation in which the person below contacts a virtual assistant for the task \
below. The values must fit the person's life, habits and preferences, and the kind and urgency \
of the task; across people, situations should vary rather than repeat one typical case.

Variables:
- "Location": the city (and country) the person is in, or a short city-related place;
- "Device": one of {devices};
- "Time of Day": one of {times_of_day};
- "Day of the Week": one of {days};
- "Environment": one of {environments};
- "Justification": one or two sentences on why these values fit this person and task.

Output one JSON object with exactly those six keys and nothing else.

Demographic profile:
{demographics}

Preferences:
{preferences}

Task description:
{task_description}

Situation:"""

MD_EARLIER = """
Tasks written already (write different ones, with other domain combinations where you can):
{tasks}
"""

RETRY = """\
That answer could not be used: {error}
Answer the original request again, correcting this, in exactly the requested format."""
