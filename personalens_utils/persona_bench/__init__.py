"""PERSONA Bench, the kit's second benchmark: does a model predict a Reddit user's reply better when it
sees the user's history (personalization) and the thread (conversation)?

The benchmark owns its data loader (`data`, `synthetic`), its items (`items`, `prompts`, `official`),
its record type (`records`), its offline predictor (`offline`), its metrics (`metrics`) and its
tables and figures (`report`); it runs on the kit's client, engine and run store (`runner`).
docs/persona_bench.md tells the whole story.
"""
