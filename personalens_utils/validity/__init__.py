"""Is the number right? Checks of a PersonaLens number against what it claims to measure (docs/validity.md).

- `anchored`: human-anchored estimates: the judge's scores on every dialogue corrected by human
  ratings of a random sample (prediction-powered inference), a synthetic annotator for offline runs,
  and a planner of how many labels an interval width needs.

Modules are imported by name (`from personalens_utils.validity import anchored`).
"""
