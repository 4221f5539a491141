"""Offline answers for benchmark-generation calls, one function per step (`Request.task`).

Answers come in exactly the format the generation prompts ask a real model for, so the same
parsers read both. They are built from the request context with the seeded RNG: options are drawn
with weights that depend on the demographics (stable per-attribute affinities from a hash, a
spending level shared by all domains, a few plain rules and country facts from
resources/offline_generation.json), and prose is composed from templates. They are plausible
stand-ins for testing the pipeline, not model output.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from personalens_utils.llm.types import FatalError, Request
from personalens_utils.reference.demographics import DemographicsError, region_of

Context = Mapping[str, Any]

_BIAS_FIELDS = ("age", "gender", "employment_status", "reside_country")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2}) (AM|PM)$")
_WAKE_HOUR = {
    "Working full-time": 6.5, "Working part-time": 7.5, "Student": 8.0, "Retired": 7.5,
    "Homemaker / Stay-at-home parent": 6.5, "Unemployed, seeking work": 8.0,
    "Unemployed, not seeking work": 8.5,
}
_NO_PREFERENCE = "no preference"
_SPENDING_TILT = {"budget": (4.0, 0.05), "mid": (0.6, 0.05), "premium": (0.05, 4.0)}
"""Spending level -> weight factors of (budget options, premium options)."""
_ORDINAL = re.compile(r"Duration|Price|Star Rating|Seat Class")
_COUNTRY_NAMES = {
    "Korea, Republic of": "South Korea", "Tanzania, United Republic of": "Tanzania",
    "Venezuela, Bolivarian Republic of": "Venezuela", "Russian Federation": "Russia", "Viet Nam": "Vietnam",
}
_WITH_ARTICLE = ("United States", "United Kingdom", "Netherlands", "Philippines", "Dominican Republic")


@cache
def _data() -> dict[str, Any]:
    resource = resources.files("personalens_utils.resources").joinpath("offline_generation.json")
    return json.loads(resource.read_text("utf-8"))


def _unit(*parts: Any) -> float:
    """A stable number in [0, 1) for the given parts: the same person always leans the same way."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _region(country: str) -> str:
    try:
        return region_of(country)
    except DemographicsError:
        return ""


def _places(demo: Mapping[str, str]) -> set[str]:
    country = demo.get("reside_country", "")
    return {country, _region(country)}


@cache
def _affinity(field: str, value: str, domain: str, ptype: str, option: str) -> float:
    """How much people with this attribute value lean to an option, in [0, 1): the same for everyone
    sharing the value, which is what ties choices to demographics."""
    return _unit(field, value, domain, ptype, option) ** 2


@cache
def _rules_matching(option: str) -> tuple[int, ...]:
    """Indices of the rules whose pattern an option matches (options repeat across calls)."""
    rules = _data()["rules"]
    return tuple(i for i, rule in enumerate(rules) if re.search(rule["pattern"], option, re.IGNORECASE))


@cache
def _spending_side(option: str) -> tuple[bool, bool]:
    """Whether an option reads as a budget choice, a premium choice (or both, or neither)."""
    spec = _data()["spending"]
    return (bool(re.search(spec["budget"], option, re.IGNORECASE)),
            bool(re.search(spec["premium"], option, re.IGNORECASE)))


def _rule_factor(demo: Mapping[str, str], option: str) -> float:
    factor = 1.0
    rules = _data()["rules"]
    for i in _rules_matching(option):
        if any(demo.get(f) in values for f, values in rules[i]["boost"].items()):
            factor *= 2.5
        if any(demo.get(f) in values for f, values in rules[i]["damp"].items()):
            factor *= 0.4
    return factor


def _spending(demo: Mapping[str, str]) -> str:
    """The person's spending level, the same in every domain (it depends on the demographics only)."""
    levels = _data()["spending"]["levels"]
    budget, mid, _ = levels.get(demo.get("employment_status", ""), levels["other"])
    u = _unit("spending", *demo.values())
    return "budget" if u < budget else "mid" if u < budget + mid else "premium"


def _weights(demo: Mapping[str, str], domain: str, ptype: str, options: Sequence[str]) -> list[float]:
    """Sampling weights of options: a stable per-attribute affinity, rules, spending level, home country."""
    places = _places(demo)
    budget_tilt, premium_tilt = _SPENDING_TILT[_spending(demo)]
    popular = _data()["popular_in"]
    weights = []
    for option in options:
        affinity = 0.5 + sum(_affinity(f, demo.get(f, ""), domain, ptype, option) for f in _BIAS_FIELDS)
        cheap, dear = _spending_side(option)
        factor = (budget_tilt if cheap else 1.0) * (premium_tilt if dear else 1.0)
        home = 4.0 if places & set(popular.get(option, ())) else 1.0
        weights.append(affinity * _rule_factor(demo, option) * factor * home)
    return weights


def _clock_weight(demo: Mapping[str, str], option: str) -> float:
    match = _CLOCK.match(option)
    if match is None:
        return 1.0
    hour = int(match[1]) % 12 + int(match[2]) / 60 + (12 if match[3] == "PM" else 0)
    center = _WAKE_HOUR.get(demo.get("employment_status", ""), 7.5)
    return math.exp(-(((hour - center) / 0.9) ** 2) / 2) + 0.002


def _draw(rng: random.Random, items: Sequence[str], weights: Sequence[float], k: int) -> list[str]:
    """`k` distinct items, weighted, without replacement."""
    pool, w = list(items), list(weights)
    chosen = []
    for _ in range(min(k, len(pool))):
        i = rng.choices(range(len(pool)), weights=w)[0]
        chosen.append(pool.pop(i))
        w.pop(i)
    return chosen


def _how_many(rng: random.Random, n_options: int) -> int:
    if n_options <= 4:
        return rng.choices((1, 2, 3), weights=(0.55, 0.35, 0.1))[0]
    if n_options <= 10:
        return rng.choices((1, 2, 3), weights=(0.3, 0.45, 0.25))[0]
    return rng.choices((2, 3, 4, 5), weights=(0.25, 0.35, 0.25, 0.15))[0]


def _home_city(demo: Mapping[str, str]) -> tuple[str, int] | None:
    cities = _data()["cities"].get(demo.get("reside_country", ""))
    if not cities:
        return None
    index = int(_unit("home", demo.get("user_id", ""), *demo.values()) * len(cities))
    name, offset = cities[index]
    return name, offset


def _categorical(
    rng: random.Random, demo: Mapping[str, str], domain: str, ptype: Mapping[str, Any]
) -> list[str]:
    options = list(ptype["options"])
    if all(o.startswith("UTC") for o in options):
        home = _home_city(demo)
        offset = home[1] if home else int(_unit("tz", *demo.values()) * 25) - 12
        return [f"UTC{offset:+d}"]
    if all(_CLOCK.match(o) for o in options):
        weights = [_clock_weight(demo, o) for o in options]
    else:
        weights = _weights(demo, domain, ptype["name"], options)
    k = _how_many(rng, len(options)) if ptype["multi_valued"] else 1
    if k > 1 and _ORDINAL.search(ptype["name"]):
        return _neighbours(rng, options, weights, k)
    chosen = _draw(rng, options, weights, k)
    if len(chosen) > 1 and _NO_PREFERENCE in chosen:
        chosen.remove(_NO_PREFERENCE)
    return chosen


def _neighbours(rng: random.Random, options: list[str], weights: list[float], k: int) -> list[str]:
    """Adjacent options of an ordered scale (durations, prices, classes): a weighted start, then
    its neighbours, so nobody likes "1-2 days" and "1 month+" but nothing in between."""
    scale = [(o, w) for o, w in zip(options, weights, strict=True) if o != _NO_PREFERENCE]
    k = min(k, 2, len(scale))
    start = rng.choices(range(len(scale) - k + 1), weights=[w for _, w in scale[: len(scale) - k + 1]])[0]
    return [o for o, _ in scale[start : start + k]]


def _bank(demo: Mapping[str, str], ptype: Mapping[str, Any]) -> list[str]:
    bank = _data()["banks"].get(ptype["name"])
    if isinstance(bank, dict):
        country = demo.get("reside_country", "")
        return bank.get(country) or bank.get(_region(country)) or bank["other"]
    if bank:
        return bank
    if ptype.get("examples"):
        return list(ptype["examples"])
    raise FatalError(f"the offline backend has no values for the open preference type {ptype['name']!r}")


def _open(rng: random.Random, demo: Mapping[str, str], domain: str, ptype: Mapping[str, Any]) -> list[str]:
    bank = _bank(demo, ptype)
    weights = _weights(demo, domain, ptype["name"], bank)
    single = not ptype["multi_valued"] or "Frequency" in ptype["name"]
    k = 1 if single else rng.choices((1, 2, 3, 4), weights=(0.15, 0.35, 0.35, 0.15))[0]
    return _draw(rng, bank, weights, k)


def _preferences(ctx: Context, rng: random.Random) -> str:
    demo, domain = ctx["demographics"], ctx["domain"]
    answer: dict[str, str | list[str]] = {}
    for ptype in ctx["preference_types"]:
        pick = _categorical if ptype["categorical"] else _open
        values = pick(rng, demo, domain, ptype)
        answer[ptype["name"]] = values if ptype["multi_valued"] else values[0]
    return json.dumps(answer, ensure_ascii=False, indent=2)


def _mask(ctx: Context, rng: random.Random) -> str:
    demo = ctx["demographics"]
    adjust = _data()["mask_adjust"]
    probability = {}
    for domain in ctx["domains"]:
        p = 0.78 + (_unit("mask", demo.get("user_id", ""), *demo.values(), domain) - 0.5) * 0.3
        for field, shifts in adjust.get(domain, {}).items():
            p += shifts.get(demo.get(field, ""), 0.0)
        probability[domain] = min(max(p, 0.05), 0.98)
    mask = {d: int(rng.random() < p) for d, p in probability.items()}
    if not any(mask.values()):
        mask[max(probability, key=probability.__getitem__)] = 1
    return json.dumps(mask, indent=2)


_EMPLOYMENT_NOUN = {
    "Working full-time": "full-time worker", "Working part-time": "part-time worker", "Student": "student",
    "Retired": "retiree", "Unemployed, seeking work": "job seeker",
    "Unemployed, not seeking work": "person who is not currently working",
    "Homemaker / Stay-at-home parent": "stay-at-home parent",
}


def _persona(demo: Mapping[str, str]) -> str:
    """"25-34 year old student living in Chile", leaving out what the person did not disclose."""
    age = demo.get("age", "")
    age_text = age.replace(" years old", " year old") + " " if age.endswith("years old") else ""
    noun = _EMPLOYMENT_NOUN.get(demo.get("employment_status", ""), "person")
    country = demo.get("reside_country", "")
    where = f" living in {_in_country(country)}" if country and country != "Prefer not to say" else ""
    return f"{age_text}{noun}{where}"


def _a(phrase: str) -> str:
    """The phrase with its indefinite article: "an 18-24 year old ...", "a student ..."."""
    article = "an" if phrase[:1].lower() in "aeiou" or re.match(r"(8|11|18)\b|8\d", phrase) else "a"
    return f"{article} {phrase}"


def _country(name: str) -> str:
    return _COUNTRY_NAMES.get(name, name)


def _in_country(name: str) -> str:
    return f"the {name}" if name in _WITH_ARTICLE else _country(name)


def _to_user(text: str) -> str:
    """Third-person intent text addressed to the user: "the user's" -> "your", "the user" -> "you"."""
    return re.sub(r"\bthe user\b", "you", re.sub(r"\bthe user's\b", "your", text))


def _phrase(description: str) -> str:
    """An intent description as a verb phrase: "Create a new alarm." -> "create a new alarm"."""
    text = description.strip().rstrip(".")
    return text[:1].lower() + text[1:]


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _value(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else _join(value)


_OPENINGS = (
    "The user, {a_who}, has relied on the assistant for {area} {period}.",
    "As {a_who}, the user has turned to the assistant for {area} {period}.",
    "This {who} has made a habit of asking the assistant about {area} {period}.",
)
_PERIODS = ("for about a year", "for several months", "since last spring", "for the past two years")
_PREFERENCE_LINES = (
    "When it comes to {type}, they keep coming back to {value}.",
    "Their {type} shows in almost every request: {value}.",
    "They have mentioned {value} more than once as their {type}.",
    "The assistant has learned that their {type} is {value}.",
    "Past requests make their {type} plain: {value}.",
)
_EVOLUTION = (
    "Early on they mostly asked the assistant to {first}; lately they also ask it to {second} and say "
    "so quickly when a suggestion misses the mark.",
    "What began as occasional requests to {first} has become a {rhythm} routine, and they now also rely "
    "on it to {second}.",
    "At first they tried the assistant with simple requests to {first}, but they now trust it to {second} "
    "without double-checking.",
)
_TONES = (
    "They write short, direct messages and like answers that get to the point.",
    "Their tone is friendly and chatty; they often explain why they need something and thank the assistant.",
    "They are polite but precise, and they correct the assistant at once when a detail is wrong.",
    "They tend to ask a follow-up question before deciding and like being offered two or three options.",
)


def _interactions(ctx: Context, rng: random.Random) -> str:
    demo, prefs = ctx["demographics"], ctx["preferences"]
    area = _phrase(ctx.get("domain_description") or ctx["domain"])
    intents = [_phrase(i["description"]) for i in ctx.get("intents", ())] or [f"help with {ctx['domain']}"]
    first, second = (rng.sample(intents, 2) if len(intents) > 1 else intents * 2)
    lines = list(_PREFERENCE_LINES)
    rng.shuffle(lines)
    preference_text = " ".join(
        lines[i % len(lines)].format(type=name.lower(), value=_value(value))
        for i, (name, value) in enumerate(prefs.items())
    )
    who = _persona(demo)
    opening = rng.choice(_OPENINGS).format(who=who, a_who=_a(who), area=area, period=rng.choice(_PERIODS))
    evolution = rng.choice(_EVOLUTION).format(
        first=first, second=second, rhythm=rng.choice(("weekly", "near-daily", "monthly"))
    )
    tone = rng.choice(_TONES)
    if demo.get("english_proficiency") in ("Basic", "Intermediate"):
        tone += " They write in simple English and prefer short, clear replies."
    return f"{opening} {preference_text}\n\n{evolution}\n\n{tone}"


_OCCASIONS = (
    "for the coming week", "for a special occasion", "after a change in their routine",
    "while planning something new", "at short notice", "before a busy stretch", "for the weekend",
    "to try something different",
)


def _sd_tasks(ctx: Context, rng: random.Random) -> str:
    n = int(ctx["n_tasks"])
    intents = [_phrase(i["description"]) for i in ctx["intents"]] or [f"get help with {ctx['domain']}"]
    names = [t["name"] for t in ctx["preference_types"]]
    order = rng.sample(names, len(names))
    occasions = rng.sample(_OCCASIONS, len(_OCCASIONS))
    tasks, seen = [], set()
    for k in range(n):
        action = intents[k % len(intents)]
        occasion = occasions[(k // len(intents)) % len(occasions)]
        relevant = list(dict.fromkeys(order[(2 * k + j) % len(order)] for j in range(rng.randint(1, 3))))
        focus = _join([r.lower() for r in relevant])
        description = (
            f"The user wants to {action} {occasion}. The assistant should get it done in a way that fits "
            f"their {focus}, asking only for what it cannot already infer."
        )
        if description in seen:
            description += f" This is request {k + 1} of its kind."
        seen.add(description)
        tasks.append({
            "task_description": description,
            "user_intent": f"You want to {_to_user(action)} {occasion}. Ask the assistant for help and make "
            f"sure the result suits your {focus}.",
            "task_goal": f"The request to {action} is completed and the result matches the user's {focus}.",
            "relevant_preference_types": relevant,
        })
    return json.dumps(tasks, ensure_ascii=False, indent=2)


_SCENARIOS = (
    (("Flights", "Hotels", "Rental Cars", "Travel", "Restaurants", "Events"),
     "plan a short trip to another city"),
    (("Train", "Buses", "Hotels", "Travel", "Restaurants", "Calendar"),
     "organise a weekend away over land"),
    (("Movies", "Restaurants", "Events", "Messaging", "Calendar", "Music"),
     "arrange an evening out with friends"),
    (("Media", "Music", "Books", "Games", "Shopping", "Restaurants"),
     "set up a relaxing weekend at home"),
    (("Calendar", "Alarm", "Messaging", "Services", "Shopping", "Finance"),
     "get a busy week under control"),
    (("Sports", "Events", "Travel", "Train", "Restaurants", "Messaging", "Hotels"),
     "follow {poss} favourite team and see a match live"),
    (("Shopping", "Books", "Music", "Media", "Games", "Messaging", "Calendar", "Restaurants"),
     "prepare a birthday surprise for someone close to {obj}"),
    (("Finance", "Calendar", "Messaging", "Alarm", "Books", "Media"),
     "take charge of {poss} investments and stay informed"),
    (("Services", "Calendar", "Alarm", "Buses", "Train", "Shopping"),
     "fit appointments and errands around {poss} commute"),
)
_MAX_MD_TYPES = 6


def _md_tasks(ctx: Context, rng: random.Random) -> str:
    n = int(ctx["n_tasks"])
    low, high = ctx["domain_range"]
    domains = {d["name"]: d for d in ctx["domains"]}
    earlier = [tuple(d) for d in ctx.get("earlier", ())]
    tasks, seen = [], set(earlier)
    for k in range(len(earlier), len(earlier) + n):
        pool, goal = _SCENARIOS[k % len(_SCENARIOS)]
        available = [d for d in pool if d in domains]
        if len(available) < low:
            available = list(domains)
        for _ in range(20):
            size = rng.randint(low, min(high, len(available)))
            chosen = sorted(rng.sample(available, size), key=available.index)
            if tuple(chosen) not in seen:
                break
        seen.add(tuple(chosen))
        steps = []
        relevant: list[str] = []
        for name in chosen:
            info = domains[name]
            intents = info.get("intents") or [{"description": f"Get help with {name}."}]
            steps.append(_phrase(rng.choice(intents)["description"]))
            types = list(info["preference_types"])
            relevant += rng.sample(types, min(len(types), rng.randint(1, 2)))
        relevant = list(dict.fromkeys(relevant))[:_MAX_MD_TYPES]
        focus = _join([r.lower() for r in relevant])
        their, your = goal.format(poss="their", obj="them"), goal.format(poss="your", obj="you")
        tasks.append({
            "task_description": f"The user wants to {their}, which means they need to {_join(steps)}. The "
            f"assistant has to coordinate {_join(chosen)} and keep the user's {focus} in mind throughout.",
            "user_intent": f"You want to {your}. Ask the assistant to {_to_user(_join(steps))}, and make "
            "sure every part suits you.",
            "task_goal": f"Every part of the plan is settled across {_join(chosen)}, consistent with the "
            f"user's {focus}.",
            "relevant_domains": chosen,
            "relevant_preference_types": relevant,
        })
    return "<response>\n" + json.dumps(tasks, ensure_ascii=False, indent=2) + "\n</response>"


_DEVICE_WEIGHTS = {  # Smartphone, Laptop, Smart speaker, Tablet, Smartwatch
    "Alarm": (5, 0.3, 3, 0.5, 2), "Messaging": (6, 1, 1, 0.5, 1.5), "Music": (4, 1, 3, 1, 1),
    "Sports": (4, 1, 0.5, 1.5, 1), "Flights": (3, 4, 0.2, 1.5, 0.1), "Hotels": (3, 4, 0.2, 1.5, 0.1),
    "Travel": (3, 3, 0.3, 2, 0.1), "Rental Cars": (3, 4, 0.2, 1, 0.1), "Train": (5, 2, 0.3, 1, 0.5),
    "Buses": (5, 1.5, 0.3, 1, 0.5), "Finance": (2, 4, 0.3, 1, 0.3), "Calendar": (3, 3, 1, 1, 1),
    "Media": (2, 2, 0.5, 3, 0.1), "Books": (2, 1.5, 1, 3, 0.1), "Games": (2, 2, 0.3, 3, 0.1),
    "Movies": (3, 2, 0.5, 2, 0.1), "Shopping": (3, 3, 0.3, 2, 0.1), "Restaurants": (4, 2, 0.5, 1.5, 0.3),
    "Events": (4, 2, 0.3, 1.5, 0.2), "Services": (4, 2, 0.5, 1.5, 0.3),
}
_DEVICES = ("Smartphone", "Laptop", "Smart speaker", "Tablet", "Smartwatch")
_TIME_WEIGHTS = {  # Morning, Afternoon, Evening, Night
    "Working full-time": (1.5, 0.7, 3, 1), "Working part-time": (1.5, 1.5, 2.5, 0.8),
    "Student": (1, 2, 2.5, 2), "Retired": (3, 2.5, 1.5, 0.3),
}
_TIMES = ("Morning", "Afternoon", "Evening", "Night")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TRAVEL = {"Flights", "Hotels", "Travel", "Rental Cars", "Train", "Buses"}
_OUTINGS = {"Events", "Movies", "Restaurants", "Sports"}


def _location(ctx: Context, rng: random.Random, domains: Sequence[str]) -> tuple[str, bool]:
    demo = ctx["demographics"]
    if _TRAVEL & set(domains) and rng.random() < 0.3:
        known = ctx["preferences"].get("Travel", {}).get("Frequent Travel Destination")
        return rng.choice(known or _data()["banks"]["Frequent Travel Destination"]), True
    home = _home_city(demo)
    if home is None:
        return "Home city (not disclosed)", False
    return f"{home[0]}, {_country(demo['reside_country'])}", False


def _situation(ctx: Context, rng: random.Random) -> str:
    demo, task = ctx["demographics"], ctx["task"]
    domains = list(task["relevant_domains"])
    location, away = _location(ctx, rng, domains)
    rows = [_DEVICE_WEIGHTS.get(d, (1,) * 5) for d in domains]
    device_w = [sum(col) / len(rows) for col in zip(*rows, strict=True)]
    if demo.get("age") == "65+ years old":
        device_w[3] *= 2
    if demo.get("age") == "18-24 years old":
        device_w[0] *= 1.5
    device = rng.choices(_DEVICES, weights=device_w)[0]
    time_w = list(_TIME_WEIGHTS.get(demo.get("employment_status", ""), (1.5, 2, 2, 1)))
    if "Alarm" in domains:
        time_w[2] *= 1.5
        time_w[3] *= 2.5
    time = rng.choices(_TIMES, weights=time_w)[0]
    day_w = [1.0] * 7
    if demo.get("employment_status", "").startswith("Working"):
        day_w[5] = day_w[6] = 2.0
    if _OUTINGS & set(domains):
        day_w[4] *= 2
        day_w[5] *= 2
    day = rng.choices(_DAYS, weights=day_w)[0]
    noisy = 0.15 + (0.25 if away else 0)
    if device == "Smartphone" and {"Buses", "Train", "Events", "Sports"} & set(domains):
        noisy += 0.35
    environment = "Noisy" if rng.random() < noisy else "Quiet"
    setting = "while away from home" if away else "from home"
    justification = (
        f"{_a(_persona(demo)).replace('a', 'A', 1)} would plausibly deal with this {_join(domains)} task "
        f"{setting} on a {day} "
        f"{time.lower()}, using a {device.lower()}; the surroundings are {environment.lower()}."
    )
    situation = {"Location": location, "Device": device, "Time of Day": time, "Day of the Week": day,
                 "Environment": environment, "Justification": justification}
    return json.dumps(situation, ensure_ascii=False, indent=2)


_STEPS: dict[str, tuple[Callable[[Context, random.Random], str], tuple[str, ...]]] = {
    "preferences": (_preferences, ("demographics", "domain", "preference_types")),
    "mask": (_mask, ("demographics", "domains")),
    "interactions": (_interactions, ("demographics", "domain", "preferences")),
    "sd_tasks": (_sd_tasks, ("domain", "intents", "preference_types", "n_tasks")),
    "md_tasks": (_md_tasks, ("domains", "n_tasks", "domain_range")),
    "situation": (_situation, ("demographics", "preferences", "task")),
}


def respond(request: Request, rng: random.Random) -> str:
    step = request.task or str(request.context.get("step", ""))
    if step not in _STEPS:
        raise FatalError(f"the offline backend has no generation step {step!r}; known: {sorted(_STEPS)}")
    handler, needed = _STEPS[step]
    missing = [k for k in needed if k not in request.context]
    if missing:
        raise FatalError(f"offline generation step {step!r}: the request context lacks {missing}")
    return handler(request.context, rng)
