"""Judge answers as models write them, read back by the strict parser."""

from __future__ import annotations

import pytest

from personalens_utils.judging.parsing import normalize_answer, parse_score, parse_verdict

P = "Personalization Score:"
N = "Naturalness Score:"
C = "Coherence Score:"

# (answer, label, low, high, expected score or None)
SCORED = [
    (
        "<response>\nPersonalization Score: 3\nKey Observations: The assistant set the alarm for 7:30 AM "
        "without asking.\nJustification: It applied the known wake-up time.\nImprovement Suggestions: "
        "Offer the usual alarm sound.\n</response>",
        P, 1, 4, 3.0,
    ),
    (
        "<response>\n**Personalization Score:** 2\n\n**Key Observations:** Preferences were only used "
        "after the user repeated them.\n</response>",
        P, 1, 4, 2.0,
    ),
    (
        "Sure, here is my evaluation.\n\n## Personalization Score\n\n4\n\n### Justification\nThe "
        "assistant anticipated the user's evening reading habit.",
        P, 1, 4, 4.0,
    ),
    ("<Response>\npersonalization score: 3/4\nJustification: solid.\n</Response>", P, 1, 4, 3.0),
    ("Naturalness Score: 4 out of 5\n\nJustification: Mostly human-like, a bit formal.", N, 1, 5, 4.0),
    ("<response>\nCoherence Score: [5]\nJustification: Every reply follows from the last.\n</response>",
     C, 1, 5, 5.0),
    ("<response>\nNaturalness Score: 3 (somewhat natural)\nJustification: repetitive phrasing\n</response>",
     N, 1, 5, 3.0),
    ("Coherence Score: 4.0\nJustification: minor lapses.", C, 1, 5, 4.0),
    # reasoning before the tagged block mentions another number; only the block counts
    (
        "I first thought the Personalization Score: 2 fits, but on reflection:\n<response>\n"
        "Personalization Score: 3\nJustification: proactive use of past interactions.\n</response>",
        P, 1, 4, 3.0,
    ),
    # the same score repeated in a summary line
    ("Personalization Score: 2\nJustification: basic.\n\nFinal Personalization Score: 2", P, 1, 4, 2.0),
    # a bare "Score:" line when the dimension word is dropped
    ("<response>\nScore: 2\nJustification: The user had to restate the genre.\n</response>", P, 1, 4, 2.0),
    # the label used in prose is not a score
    ("<response>\nNaturalness Score: 5\nJustification: The naturalness score reflects fluent, varied "
     "replies.\n</response>", N, 1, 5, 5.0),
    # malformed: out of range
    ("<response>\nPersonalization Score: 5\nJustification: excellent\n</response>", P, 1, 4, None),
    ("Naturalness Score: 0\nJustification: robotic", N, 1, 5, None),
    # malformed: two different scores
    ("Personalization Score: 2\nJustification: ...\nPersonalization Score: 3", P, 1, 4, None),
    # malformed: a range, the template echoed, a half score, a wrong scale
    ("<response>\nCoherence Score: 4-5\nJustification: very coherent\n</response>", C, 1, 5, None),
    ("<response>\nPersonalization Score: [1-4]\nKey Observations: [Observations]\n</response>",
     P, 1, 4, None),
    ("Personalization Score: 2.5\nJustification: between basic and strong", P, 1, 4, None),
    ("Personalization Score: 3/5\nJustification: good", P, 1, 4, None),
    ("Naturalness Score: 8/10", N, 1, 5, None),
    ("Coherence Score: 3 or 4, depending on how the last turn is read.", C, 1, 5, None),
    # malformed: no score at all, a word instead of a number, a refusal
    ("<response>\nThe assistant was helpful and friendly throughout.\n</response>", P, 1, 4, None),
    ("Personalization Score: Strong\nJustification: applied preferences", P, 1, 4, None),
    ("I'm sorry, but I can't evaluate this conversation.", N, 1, 5, None),
    ("", C, 1, 5, None),
    # another dimension's label is not this one's score
    ("<response>\nNaturalness Score: 4\n</response>", C, 1, 5, None),
]


@pytest.mark.parametrize(("answer", "label", "low", "high", "expected"), SCORED)
def test_scores(answer: str, label: str, low: int, high: int, expected: float | None) -> None:
    parsed = parse_score(answer, label, low, high)
    assert parsed.score == expected, parsed.problem
    assert parsed.ok is (expected is not None)
    if expected is None:
        assert parsed.problem, "a rejected answer must say why"
    else:
        assert parsed.problem is None


VERDICTS = [
    ("VERDICT: True\nEXPLANATION: The alarm was set for 7:00 AM on weekdays as the goal asks.", 1.0),
    ("**VERDICT:** False\n**EXPLANATION:** No reservation was ever confirmed.", 0.0),
    ("verdict: TRUE.\nexplanation: all goals met", 1.0),
    # continuing after a prompt that ends with "VERDICT:"
    (" False\nEXPLANATION: The user never received a booking confirmation.", 0.0),
    ("After reading the conversation carefully:\n\nVERDICT: true\n\nEXPLANATION: The playlist was "
     "created and the user thanked the assistant.", 1.0),
    ("My verdict is that the goal was reached.\nVERDICT: True\nEXPLANATION: confirmed booking", 1.0),
    ("<response>VERDICT: [False]\nEXPLANATION: the hotel was not booked</response>", 0.0),
    # malformed
    ("VERDICT: Partially\nEXPLANATION: only the movie was booked", None),
    ("VERDICT: True or False\nEXPLANATION: unclear", None),
    ("VERDICT: True\nEXPLANATION: the first goal is met.\nVERDICT: False", None),
    ("The assistant completed the task well.", None),
    ("True, the goal was met.", None),  # a bare leading boolean needs an EXPLANATION line
]


@pytest.mark.parametrize(("answer", "expected"), VERDICTS)
def test_verdicts(answer: str, expected: float | None) -> None:
    parsed = parse_verdict(answer)
    assert parsed.score == expected, parsed.problem
    if expected is None:
        assert parsed.problem


def test_explanations_are_kept() -> None:
    verdict = parse_verdict("VERDICT: False\nEXPLANATION: No reservation was ever confirmed.")
    assert verdict.explanation == "No reservation was ever confirmed."
    score = parse_score(
        "<response>\nPersonalization Score: 3\nKey Observations: used the usual time\n"
        "Justification: proactive\n</response>",
        P, 1, 4,
    )
    assert score.explanation.startswith("Key Observations: used the usual time")
    assert "Justification: proactive" in score.explanation


def test_normalize_answer_strips_markdown_and_tags() -> None:
    text = "thinking...\n<response>\n## **Coherence Score:** 4\n> - Justification: `fine`\n</response>"
    assert normalize_answer(text) == "Coherence Score: 4\nJustification: fine"
