"""The kit's own prompt text for PERSONA Bench's three tasks (the authors' text is never copied here;
`official` reads it from the user's copy at run time).

One prompt is made of blocks: the post, the user's earlier reply shown as an example (history; the
user's own for P-*, another user's for NP-Conv), the conversation thread (for *-Conv), the target
reply, and the question of the task. `PROMPT_VERSION` is part of every record's id.
"""

from __future__ import annotations

PROMPT_VERSION = "kit-v1"

SYSTEM = (
    "You predict how a Reddit user's reply was received or what it said. Use only what you are shown "
    "and answer in exactly the form asked for."
)

POST = 'Post in r/{subreddit} by u/{author}, titled "{title}":\n{content}'

HISTORY = (
    "An earlier reply by u/{author}, for reference ({whose}):\n"
    'In answer to: "{parent}"\n'
    'u/{author} wrote: "{body}"\n'
    "{outcome}"
)
HISTORY_SCORE = "That reply's score was {score}."
WHOSE_OWN = "the same user"
WHOSE_OTHER = "a different user, shown as a general example"

THREAD = (
    "The conversation under the post, one comment a line, indented by depth (author, score, text):\n{tree}"
)
THREAD_LINE = "{indent}- u/{author} [{score}]: {body}"
HIDDEN_SCORE = "score hidden"

TARGET_SCORED = (
    'u/{author} replied to u/{parent_author}, who wrote: "{parent}"\nu/{author}\'s reply: "{body}"'
)
TARGET_TEXT = (
    'u/{author} replied to u/{parent_author}, who wrote: "{parent}"\nThe text of that reply is not shown.'
)

ASK = {
    "3.1": (
        "Was the score of u/{author}'s reply above positive or negative? "
        "Answer with one word: positive or negative."
    ),
    "3.2": "What was the score of u/{author}'s reply above?{hint} Answer with the number only.",
    "3.3": "Write the reply u/{author} posted. Answer with the reply's text only.",
}
SIGN_HINT = {1: " It was positive.", -1: " It was negative.", 0: ""}
