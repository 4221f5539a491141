"""The notebook-facing top: the session a notebook opens (`base`) and one facade per stage, each a
notebook's setup cell (`generation`, `benchmark_validation`, `simulation`, `judging`, `analysis`, `trust`,
`persona_bench`, `validity`). Nothing below imports it."""
