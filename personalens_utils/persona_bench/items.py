"""PERSONA Bench items: three tasks x three settings, chosen as the authors' prompt makers choose them,
written in the kit's own prompt text.

Tasks: "3.1" the sign of the score of the user's reply (positive/negative), "3.2" that score, "3.3"
that reply's text. Which posts qualify and which reply is the target follow the authors' scripts:

- 3.1/3.2: a post with more than three participants and more than two live replies by its author;
  the target is the author's reply with the largest absolute score (latest first on ties) to a live
  parent, kept only when that score's absolute value exceeds 3; the second such reply is the
  history example. Half of the positive targets, those of the smallest scores, are dropped to
  balance the labels (3.1 and 3.2 alike, as the authors do).
- 3.3: a post where the author replied at least twice and took part in more than one comment
  tree; the target is the author's latest reply (not deleted, in a tree at most a third deleted),
  the one before it is the history example.

Settings: P-Conv shows the user's own history example and the thread (target hidden); P-NonConv
the history example without the thread; NP-Conv the thread with another user's history example
(the next user's, in file order). `context` carries what the prompt shows, structured, for the
offline predictor; it never reaches a real model.

Items are built in two streamed passes over the data (the first finds the balancing threshold and
each user's example), so the authors' full size is never held at once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from personalens_utils.persona_bench import prompts as P
from personalens_utils.persona_bench.data import Comment, Post, User, find_dataset, iter_users
from personalens_utils.runstore.identity import Variant, item_key

TASKS = ("3.1", "3.2", "3.3")
SETTINGS = ("P-Conv", "P-NonConv", "NP-Conv")
TASK_NAMES = {"3.1": "score sentiment", "3.2": "score", "3.3": "reply text"}
KIT = Variant(P.PROMPT_VERSION)
"""Items written with the kit's prompt text."""
_DEAD = ("", "[deleted]", "[removed]")


@dataclass(frozen=True)
class PersonaItem:
    """One question to a model: its task, setting, the user and target reply, the truth and the prompt."""

    dataset: str
    variant: Variant
    """Whose prompts (the kit's or the authors' prompt makers') and their version."""
    task: str
    setting: str
    user: str
    domain: str
    target: str
    truth: str | float
    prompt: str
    context: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The item's identity in a dataset (its records add model, backend and prompt version)."""
        return item_key(self.dataset, self.variant, self.task, self.setting, self.target)


@dataclass(frozen=True)
class _Node:
    cid: str
    comment: Comment
    parent_cid: str
    parent_author: str
    parent_body: str
    parent_score: float | None


@dataclass(frozen=True)
class _Example:
    """A reply shown as history: what it answered, what it said, its score."""

    author: str
    parent: str
    body: str
    score: float | None

    def context(self) -> dict[str, Any]:
        return {"author": self.author, "body": self.body, "score": self.score}


def clean(text: str | None) -> str:
    """Text on one line, trimmed (the form the authors compare and show)."""
    return "" if text is None else text.replace("\n", " ").replace("\r", " ").strip()


def _dead(text: str | None) -> bool:
    return clean(text).lower() in _DEAD


def _when(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def flatten(post: Post, ref: str) -> list[_Node]:
    """Every comment of a post with the authors' ids (`<parent id>-c<n>`, n counted depth first)."""
    nodes: list[_Node] = []
    ids: dict[int, str] = {}
    for n, (comment, parent) in enumerate(post.walk(), 1):
        cid = f"{ref if parent is None else ids[id(parent)]}-c{n}"
        ids[id(comment)] = cid
        if parent is None:
            nodes.append(_Node(cid, comment, ref, post.author, clean(post.content), post.score))
        else:
            nodes.append(
                _Node(cid, comment, ids[id(parent)], parent.author, clean(parent.body), parent.score)
            )
    return nodes


def score_targets(post: Post, ref: str) -> tuple[_Node, _Node | None] | None:
    """The 3.1/3.2 target reply of a post and its history example, or None when the post does not qualify."""
    nodes = flatten(post, ref)
    participants = {post.author} | {n.comment.author for n in nodes if n.comment.author}
    own = [n for n in nodes if n.comment.author == post.author]
    if len(participants) <= 3 or sum(not _dead(n.comment.body) for n in own) <= 2:
        return None
    candidates = [
        n
        for n in own
        if n.comment.score is not None
        and not _dead(n.comment.body)
        and not _dead(n.parent_body)
        and _when(n.comment.timestamp) is not None
    ]
    candidates.sort(key=lambda n: (abs(n.comment.score or 0), _when(n.comment.timestamp)), reverse=True)
    if not candidates or abs(candidates[0].comment.score or 0) <= 3:
        return None
    second = candidates[1] if len(candidates) > 1 and abs(candidates[1].comment.score or 0) > 0 else None
    return candidates[0], second


def text_targets(post: Post, ref: str) -> tuple[_Node, _Node] | None:
    """The 3.3 target reply of a post and its history example, or None when the post does not qualify."""
    nodes = flatten(post, ref)
    own = [
        n
        for n in nodes
        if n.comment.author == post.author
        and n.comment.body is not None
        and _when(n.comment.timestamp) is not None
    ]
    own.sort(key=lambda n: _when(n.comment.timestamp), reverse=True)
    if len(own) < 2 or clean(own[0].comment.body) in ("[removed]", "[deleted]"):
        return None
    trees = [c for c in post.comments if c.replies and _touches(c, post.author)]
    if len(trees) <= 1:
        return None
    tree = next(c for c in post.comments if own[0].comment in _members(c))
    members = list(_members(tree))
    if sum(clean(m.body) in ("[removed]", "[deleted]") for m in members) / len(members) > 0.33:
        return None
    return own[0], own[1]


def _members(comment: Comment) -> Iterator[Comment]:
    yield comment
    for reply in comment.replies:
        yield from _members(reply)


def _touches(comment: Comment, author: str) -> bool:
    return any(m.author == author for m in _members(comment))


def dataset_id(path: str | os.PathLike[str]) -> str:
    """A short digest of the dataset file's bytes: records of different data never share an id."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return f"{Path(path).name}:{digest.hexdigest()[:12]}"


@dataclass
class _Survey:
    """What the first pass learns: the positive score targets to keep, each user's examples."""

    kept_positive: set[tuple[int, int]]
    score_example: dict[int, _Example]
    text_example: dict[int, _Example]
    users: int


def _example(author: str, node: _Node | None) -> _Example | None:
    if node is None:
        return None
    return _Example(author, node.parent_body, clean(node.comment.body), node.comment.score)


def _survey(users: Iterable[User]) -> _Survey:
    positives: list[tuple[float, tuple[int, int]]] = []
    score_ex: dict[int, _Example] = {}
    text_ex: dict[int, _Example] = {}
    count = 0
    for u, user in enumerate(users, 1):
        count = u
        for p, post in enumerate(user.posts, 1):
            ref = f"u{u}p{p}"
            found = score_targets(post, ref)
            if found:
                target, second = found
                if (target.comment.score or 0) > 0:
                    positives.append((abs(target.comment.score or 0), (u, p)))
                example = _example(user.name, second)
                if example and u not in score_ex:
                    score_ex[u] = example
            text = text_targets(post, ref)
            if text and u not in text_ex:
                text_ex[u] = _example(user.name, text[1])  # type: ignore[assignment]
    positives.sort(key=lambda x: x[0])
    kept = {where for _, where in positives[len(positives) // 2 :]}
    return _Survey(kept, score_ex, text_ex, count)


def _other(examples: dict[int, _Example], u: int, users: int) -> _Example | None:
    """Another user's example: the next user's in file order that has one (wrapping round)."""
    for step in range(1, users):
        found = examples.get((u - 1 + step) % users + 1)
        if found is not None:
            return found
    return None


def iter_items(
    path: str | os.PathLike[str] | None = None,
    *,
    tasks: Sequence[str] = TASKS,
    settings: Sequence[str] = SETTINGS,
    users: int | None = None,
) -> Iterator[PersonaItem]:
    """The kit's items of the dataset (see `find_dataset`), streamed; `users` keeps the first n users."""
    _check(tasks, settings)
    file = find_dataset(path)
    data = dataset_id(file)

    def read() -> Iterator[User]:
        for u, user in enumerate(iter_users(file), 1):
            if users is not None and u > users:
                return
            yield user

    survey = _survey(read())
    for u, user in enumerate(read(), 1):
        for p, post in enumerate(user.posts, 1):
            ref = f"u{u}p{p}"
            if "3.1" in tasks or "3.2" in tasks:
                found = score_targets(post, ref)
                target = found[0] if found else None
                if found and target and ((target.comment.score or 0) < 0 or (u, p) in survey.kept_positive):
                    own = _example(user.name, found[1])
                    other = _other(survey.score_example, u, survey.users)
                    for task in (t for t in ("3.1", "3.2") if t in tasks):
                        for setting in settings:
                            example = own if setting.startswith("P-") else other
                            question = _Question(data, setting, user, post, ref, target, example)
                            yield _score_item(question, task)
            if "3.3" in tasks:
                text = text_targets(post, ref)
                if text:
                    own = _example(user.name, text[1])
                    other = _other(survey.text_example, u, survey.users)
                    for setting in settings:
                        example = own if setting.startswith("P-") else other
                        yield _text_item(_Question(data, setting, user, post, ref, text[0], example))


def _check(tasks: Sequence[str], settings: Sequence[str]) -> None:
    bad = [t for t in tasks if t not in TASKS] + [s for s in settings if s not in SETTINGS]
    if bad:
        raise ValueError(
            f"unknown task(s) or setting(s) {bad}; tasks are {list(TASKS)}, settings {list(SETTINGS)}"
        )


def _post_block(post: Post) -> str:
    content = clean(post.content)
    return P.POST.format(
        subreddit=post.subreddit,
        author=post.author,
        title=clean(post.title),
        content=content[:500] + ("..." if len(content) > 500 else ""),
    )


def _history_block(example: _Example | None, own: bool, with_score: bool) -> str:
    if example is None:
        return ""
    outcome = P.HISTORY_SCORE.format(score=_num(example.score)) if with_score else ""
    return P.HISTORY.format(
        author=example.author,
        whose=P.WHOSE_OWN if own else P.WHOSE_OTHER,
        parent=example.parent[:200],
        body=example.body,
        outcome=outcome,
    ).strip()


def _thread_block(post: Post, ref: str, target: _Node, *, drop: bool) -> str:
    lines = []
    depth: dict[str, int] = {ref: -1}
    skip: set[str] = set()
    for node in flatten(post, ref):
        depth[node.cid] = depth[node.parent_cid] + 1
        if node.parent_cid in skip or (drop and node.cid == target.cid):
            skip.add(node.cid)
            continue
        score = P.HIDDEN_SCORE if node.cid == target.cid else _num(node.comment.score)
        lines.append(
            P.THREAD_LINE.format(
                indent="  " * depth[node.cid],
                author=node.comment.author,
                score=score,
                body=clean(node.comment.body),
            )
        )
    return P.THREAD.format(tree="\n".join(lines))


def _num(value: float | None) -> str:
    if value is None:
        return "unknown"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class _Question:
    """What one item is asked about: the user, the post and its target reply, the history example
    shown (the user's own under P-*, another's under NP-Conv) and the setting."""

    data: str
    setting: str
    user: User
    post: Post
    ref: str
    target: _Node
    example: _Example | None

    @property
    def conv(self) -> bool:
        """Whether the thread is shown."""
        return self.setting != "P-NonConv"

    def blocks(self, *, scored: bool) -> list[str]:
        """The post, the history example and (with the thread shown) the thread, the target hidden."""
        blocks = [_post_block(self.post), _history_block(self.example, self.setting.startswith("P-"),
                                                         with_score=scored)]
        if self.conv:
            blocks.append(_thread_block(self.post, self.ref, self.target, drop=not scored))
        return blocks

    def item(self, task: str, truth: str | float, blocks: Sequence[str],
             context: dict[str, Any]) -> PersonaItem:
        return PersonaItem(self.data, KIT, task, self.setting, self.user.name, self.post.subreddit,
                           self.target.cid, truth, "\n\n".join(b for b in blocks if b), context)

    def parent(self) -> dict[str, Any]:
        return {"body": self.target.parent_body, "score": self.target.parent_score if self.conv else None}


def _score_item(q: _Question, task: str) -> PersonaItem:
    """One 3.1/3.2 item."""
    target = q.target
    score = target.comment.score or 0.0
    blocks = q.blocks(scored=True)
    blocks.append(
        P.TARGET_SCORED.format(
            author=q.user.name,
            parent_author=target.parent_author,
            parent=target.parent_body[:200],
            body=clean(target.comment.body),
        )
    )
    sign = 1 if score > 0 else -1 if score < 0 else 0
    blocks.append(P.ASK[task].format(author=q.user.name, hint=P.SIGN_HINT[sign]))
    truth: str | float = ("positive" if score > 0 else "negative") if task == "3.1" else float(score)
    context: dict[str, Any] = {
        "task": task,
        "setting": q.setting,
        "history": [q.example.context()] if q.example else [],
        "parent": q.parent(),
        "reply": clean(target.comment.body),
    }
    if task == "3.2":
        context["sign_hint"] = sign
    return q.item(task, truth, blocks, context)


def _text_item(q: _Question) -> PersonaItem:
    """One 3.3 item."""
    target = q.target
    blocks = q.blocks(scored=False)
    blocks.append(
        P.TARGET_TEXT.format(author=q.user.name, parent_author=target.parent_author,
                             parent=target.parent_body)
    )
    blocks.append(P.ASK["3.3"].format(author=q.user.name))
    context = {
        "task": "3.3",
        "setting": q.setting,
        "history": [{"author": q.example.author, "body": q.example.body}] if q.example else [],
        "parent": q.parent(),
    }
    return q.item("3.3", clean(target.comment.body), blocks, context)
