"""The numbers every stage that reads a run store shares, drawn once on their own floor under those
stages (docs/architecture.md, "Layers"): `scores` (the tidy score frame of a store, its aggregates and
provenance), `stats` (intervals, paired tests, when an interval is withheld), `bootstrap` (intervals
that resample users, paired differences), `design` (the nested design frame they read) and `display`
(what every table says alike: dimension names, cell formats, the provenance and source notes).

analysis makes the paper's tables from them; trust, validity, robustness and explore read them too.
"""
