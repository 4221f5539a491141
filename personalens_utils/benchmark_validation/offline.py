"""Offline answers to the profile consistency check (call kind VALIDATION, task "profile_consistency").

A few explicit rules stand in for a model's judgement, applied to the request context's
`preferences` ({domain: {type: value}}):

- within a domain: a one-valued preference type answered with several values, or "no preference"
  given together with specific values;
- across domains: a spending level that is budget-only in one domain and luxury-only in another
  (e.g. only budget-friendly restaurants but only first-class trains).

The answer uses the prompt's four-line form, so the strict parser reads it like a model's.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from personalens_utils.llm.types import FatalError, Request
from personalens_utils.prompt_templates.validation import (
    CROSS_LABEL,
    DOMAINS_LABEL,
    EXPLANATION_LABEL,
    WITHIN_LABEL,
)
from personalens_utils.reference.schema import load_schema

NO_PREFERENCE = "no preference"

SPENDING_TYPES: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {
    ("Restaurants", "Price Range"): (frozenset({"budget-friendly"}), frozenset({"upscale", "luxury"})),
    ("Shopping", "Price Range Preference"): (frozenset({"budget"}), frozenset({"luxury"})),
    ("Flights", "Seat Class Preference"): (frozenset({"economy"}), frozenset({"business", "first"})),
    ("Hotels", "Star Rating Preference"): (frozenset({"3 star"}), frozenset({"5 star"})),
    ("Train", "Preferred Train Class"): (frozenset({"standard class"}), frozenset({"first class"})),
    ("Events", "Price Range"): (frozenset({"free", "under $50"}), frozenset({"$100+"})),
}
"""(domain, type) -> (budget values, luxury values): the types that reveal a spending level."""


def _values(answer: Any) -> list[str]:
    return [str(v) for v in answer] if isinstance(answer, list) else [str(answer)]


def within_domain_conflicts(preferences: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(domain, reason) for each within-domain rule a profile breaks."""
    schema = load_schema()
    found = []
    for domain, prefs in preferences.items():
        if not schema.has_domain(domain):
            continue
        known = set(schema.domain(domain).preference_names)
        for name, answer in prefs.items():
            values = _values(answer)
            if name in known and not schema.preference(domain, name).multi_valued and len(values) > 1:
                found.append((domain, f"{name} should hold one value but lists {', '.join(values)}"))
            lowered = [v.lower() for v in values]
            if NO_PREFERENCE in lowered and len(values) > 1:
                found.append((domain, f"{name} says 'no preference' yet also names specific values"))
    return found


def spending_levels(preferences: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Domain -> "budget" or "luxury" where every value of its spending type is on one side."""
    levels = {}
    for (domain, name), (budget, luxury) in SPENDING_TYPES.items():
        answer = preferences.get(domain, {}).get(name)
        if answer is None:
            continue
        values = set(_values(answer))
        if values and values <= budget:
            levels[domain] = "budget"
        elif values and values <= luxury:
            levels[domain] = "luxury"
    return levels


def respond_consistency(request: Request, rng: random.Random) -> str:
    """The four-line consistency answer for the profile in `request.context`."""
    if request.task != "profile_consistency":
        raise FatalError(f"the offline backend has no VALIDATION responder for task {request.task!r}")
    preferences = request.context.get("preferences")
    if not isinstance(preferences, Mapping):
        raise FatalError("a consistency request needs context['preferences'] ({domain: {type: value}})")
    within = within_domain_conflicts(preferences)
    levels = spending_levels(preferences)
    cheap = sorted(d for d, level in levels.items() if level == "budget")
    dear = sorted(d for d, level in levels.items() if level == "luxury")
    cross = bool(cheap and dear)
    domains = list(dict.fromkeys([d for d, _ in within] + (cheap + dear if cross else [])))
    reasons = [f"in {d}, {why}" for d, why in within]
    if cross:
        reasons.append(
            f"spending is budget-only in {', '.join(cheap)} but luxury-only in {', '.join(dear)}"
        )
    if reasons:
        explanation = "Conflicts found: " + "; ".join(reasons) + "."
    else:
        explanation = rng.choice([
            "The preferences fit together; no two of them exclude each other.",
            "Nothing in the profile contradicts itself; the tastes are varied but compatible.",
            "No conflict: each domain's preferences agree with each other and with the other domains.",
        ])
    return (
        f"{WITHIN_LABEL} {int(bool(within))}\n"
        f"{CROSS_LABEL} {int(cross)}\n"
        f"{DOMAINS_LABEL} {', '.join(domains) if domains else 'none'}\n"
        f"{EXPLANATION_LABEL} {explanation}"
    )
