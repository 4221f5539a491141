"""Deterministic synthetic PERSONA Bench data in exactly the authors' layout, for the offline default,
the tests and the scale benchmark.

Nothing here is Reddit data: users, threads and replies are drawn from a seeded generator, and every
table or figure made from it says so (`SYNTHETIC_LABEL`). The generator plants two signals a reader
can check, so the three settings differ for a stated reason:

- the sign of a user's reply score follows the score of the comment it answers (85% of the time):
  only a prompt that shows the thread (P-Conv, NP-Conv) shows it;
- the size of a user's reply scores and the words a user opens and closes replies with are the
  user's own: only the user's history (P-Conv, P-NonConv) shows them.

The file is written one user at a time, so the authors' full size (3,878 users, about 111k
conversation threads) never sits in memory.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from personalens_utils.persona_bench.data import DATA_FILE

SYNTHETIC_LABEL = "synthetic PERSONA Bench data (seeded generator, not Reddit data)"

DOMAINS: dict[str, tuple[str, ...]] = {
    "worldnews": ("election", "treaty", "summit", "sanctions", "border", "minister", "protest", "ceasefire"),
    "gaming": ("patch", "speedrun", "console", "boss", "multiplayer", "mod", "controller", "sequel"),
    "technology": ("chip", "battery", "privacy", "startup", "browser", "encryption", "cloud", "robot"),
    "science": ("telescope", "vaccine", "fossil", "genome", "quantum", "climate", "neuron", "comet"),
    "movies": ("director", "sequel", "trailer", "soundtrack", "casting", "screenplay", "remake", "premiere"),
    "sports": ("transfer", "playoffs", "coach", "injury", "referee", "season", "draft", "stadium"),
    "politics": ("senate", "budget", "campaign", "policy", "debate", "poll", "governor", "veto"),
    "books": ("novel", "author", "chapter", "library", "sequel", "poetry", "memoir", "translation"),
    "music": ("album", "concert", "guitar", "lyrics", "festival", "drummer", "vinyl", "chorus"),
    "personalfinance": ("budget", "mortgage", "savings", "index", "credit", "retirement", "taxes", "rent"),
}
"""The ten domains (subreddits) and the topic words their threads are about."""

OPENERS = (
    "Honestly,",
    "Look,",
    "Fair point, but",
    "Ha,",
    "In my experience",
    "To be clear,",
    "Well,",
    "Hot take:",
    "Agreed, and",
    "Respectfully,",
    "Okay so",
    "Funny enough,",
)
CLOSERS = (
    "Just my two cents.",
    "Cheers.",
    "Change my mind.",
    "Happy to be wrong.",
    "Anyway.",
    "Source: me.",
    "Thanks for reading.",
    "That's all.",
    "No regrets.",
    "Stay curious.",
)
FILLERS = (
    "is what matters here",
    "gets overlooked a lot",
    "changed how I see it",
    "is overrated",
    "deserves more credit",
    "was the real story",
    "keeps coming up",
    "is not that simple",
)
COMMENT_LEADS = (
    "Has anyone thought about the",
    "I can't stop thinking about the",
    "Unpopular view on the",
    "Serious question about the",
    "Nobody mentions the",
    "Big news on the",
)

FULL_SIZE_USERS = 3878
"""The authors' number of users; with the default posts per user and threads per post the
generator then writes about 19k posts and 111k conversation threads, as their README reports."""
THREAD_EXTRA = 0.29
"""Chance of a post's extra thread: 4-7 threads plus this makes 5.79 a post, the README's
111,239 conversations over 19,215 posts."""


def _user(rng: random.Random, index: int, start: datetime, posts: int) -> tuple[str, list[dict[str, Any]]]:
    name = f"synth_user_{index:05d}"
    home = rng.sample(sorted(DOMAINS), 2)
    scale = rng.choice((6, 12, 25, 50, 90))
    opener, closer = rng.choice(OPENERS), rng.choice(CLOSERS)
    clock = start + timedelta(days=rng.randrange(0, 300))
    out = []
    for p in range(posts):
        domain = home[0] if rng.random() < 0.7 else home[1]
        words = DOMAINS[domain]
        clock += timedelta(days=rng.randrange(1, 20), minutes=rng.randrange(0, 1440))
        topic = rng.choice(words)
        post: dict[str, Any] = {
            "title": f"Thoughts on the {topic} in r/{domain}",
            "url": f"https://example.invalid/r/{domain}/{index}_{p}",
            "content": (
                f"I have been reading about the {topic} and the {rng.choice(words)}. What do you think?"
            ),
            "__sub__": domain,
            "score": rng.randrange(1, 400),
            "author": name,
            "timestamp": _iso(clock),
            "comments": [],
        }
        threads = rng.randrange(4, 8) + (rng.random() < THREAD_EXTRA)
        answered = set(rng.sample(range(threads), max(3, sum(rng.random() < 0.75 for _ in range(threads)))))
        when = clock
        for t in range(threads):
            when += timedelta(minutes=rng.randrange(3, 90))
            keys = rng.sample(words, 2)
            top_score = (
                rng.choice((-1, 1)) * rng.randrange(1, 40) if rng.random() < 0.45 else rng.randrange(1, 60)
            )
            top: dict[str, Any] = {
                "body": "[deleted]"
                if rng.random() < 0.03
                else (f"{rng.choice(COMMENT_LEADS)} {keys[0]} and the {keys[1]}."),
                "author": f"synth_commenter_{rng.randrange(0, 50000):05d}",
                "score": top_score,
                "timestamp": _iso(when),
                "replies": [],
            }
            if t in answered:
                sign = (1 if top_score > 0 else -1) * (1 if rng.random() < 0.85 else -1)
                size = max(4, round(scale * rng.uniform(0.6, 1.4)))
                reply: dict[str, Any] = {
                    "body": f"{opener} the {keys[0]} {rng.choice(FILLERS)}, and the {keys[1]} too. {closer}",
                    "author": name,
                    "score": sign * size,
                    "timestamp": _iso(when + timedelta(minutes=rng.randrange(1, 60))),
                    "replies": [],
                }
                if rng.random() < 0.5:
                    reply["replies"].append(
                        {
                            "body": f"Not sure about the {rng.choice(words)}, but fair.",
                            "author": f"synth_commenter_{rng.randrange(0, 50000):05d}",
                            "score": rng.randrange(-5, 20),
                            "timestamp": _iso(when + timedelta(minutes=rng.randrange(61, 200))),
                            "replies": [],
                        }
                    )
                top["replies"].append(reply)
            out_comment = top
            post["comments"].append(out_comment)
        out.append(post)
    return name, out


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def synthetic_users(
    n_users: int, *, seed: int = 0, posts_per_user: int = 5
) -> Iterator[tuple[str, list[dict]]]:
    """(user name, posts) for `n_users` users, each from its own seeded stream (same seed, same data)."""
    if n_users < 1 or posts_per_user < 1:
        raise ValueError(f"n_users and posts_per_user must be at least 1, got {n_users}, {posts_per_user}")
    start = datetime(2023, 1, 1, tzinfo=UTC)
    for index in range(1, n_users + 1):
        yield _user(random.Random(f"persona-bench:{seed}:{index}"), index, start, posts_per_user)


def write_synthetic(
    out: str | os.PathLike[str], n_users: int = 40, *, seed: int = 0, posts_per_user: int = 5
) -> Path:
    """Write `merged_posts_remapped.json` (into `out` if it is a folder, else to `out`), one user at a
    time; returns the file. Same arguments, same bytes."""
    target = Path(out)
    if target.suffix != ".json":
        target.mkdir(parents=True, exist_ok=True)
        target = target / DATA_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".json.partial")
    with partial.open("w", encoding="utf-8") as fh:
        fh.write("{")
        for i, (name, posts) in enumerate(synthetic_users(n_users, seed=seed, posts_per_user=posts_per_user)):
            fh.write(
                ("," if i else "") + "\n" + json.dumps(name) + ": " + json.dumps(posts, ensure_ascii=False)
            )
        fh.write("\n}\n")
    partial.replace(target)
    return target
