"""Prompts of benchmark validation: the profile consistency check (paper §2.4, Appendix A.4, Figure 21).

Written for this kit. Like the paper's checker it shows a profile's demographics and its
preferences by domain, asks for conflicts within a domain and between domains, and wants a 0/1
label with an explanation. The answer format (one labelled line each) is the kit's own, so that
`consistency.parse_consistency_answer` can read it strictly. Bump `CONSISTENCY_PROMPT_VERSION`
whenever a template changes.
"""

from __future__ import annotations

CONSISTENCY_PROMPT_VERSION = "v1"

WITHIN_LABEL = "WITHIN-DOMAIN CONFLICT:"
CROSS_LABEL = "CROSS-DOMAIN CONFLICT:"
DOMAINS_LABEL = "DOMAINS:"
EXPLANATION_LABEL = "EXPLANATION:"

CONSISTENCY_SYSTEM = """\
You review synthetic user profiles for a personalization benchmark and look for contradictions \
in them."""

CONSISTENCY = """\
Below is a synthetic user PROFILE: the person's demographics and what they prefer in each domain \
an assistant may help them with. Decide whether the profile contradicts itself.

A conflict means two or more preferences, tastes or values that cannot both hold for the same \
person: they exclude each other, are incompatible, or say opposite things. Check two kinds:
- within a domain: preferences of the same domain conflict with each other;
- across domains: a preference in one domain conflicts with one in another domain (or with the \
demographics).
Varied or unusual tastes are not conflicts. Flag only what truly cannot go together.

For each kind, give 1 if you find at least one conflict of that kind and 0 if you find none. Then \
name the domains involved (or write none) and explain your decision briefly, citing the \
preferences concerned.

Example (no conflict):
WITHIN-DOMAIN CONFLICT: 0
CROSS-DOMAIN CONFLICT: 0
DOMAINS: none
EXPLANATION: A frugal student who likes economy flights and budget restaurants; everything fits.

Example (conflict):
WITHIN-DOMAIN CONFLICT: 1
CROSS-DOMAIN CONFLICT: 0
DOMAINS: Restaurants
EXPLANATION: Restaurants lists a strict vegan diet and steakhouses as the favourite cuisine.

Reply in exactly this form, one line each, nothing else:
WITHIN-DOMAIN CONFLICT: <0 or 1>
CROSS-DOMAIN CONFLICT: <0 or 1>
DOMAINS: <domains involved, separated by commas, or none>
EXPLANATION: <your reasons>

PROFILE

Demographics:
{demographics}

Preferences by domain:
{preferences}
"""

CONSISTENCY_RETRY = """\
Your answer could not be read: {problem}. Reply again in exactly the requested form: four lines \
starting with WITHIN-DOMAIN CONFLICT:, CROSS-DOMAIN CONFLICT:, DOMAINS: and EXPLANATION:."""
