"""Runs that travel: Inspect logs and Hugging Face datasets (`formats`), and the official scripts'
output layout both ways (`official`). A stage-level package: it reads the simulation's and judging's
records."""
