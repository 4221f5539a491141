"""Reference material the kit ships and every layer reads: the schema, demographic tables, situation fields.

The bottom layer: it imports nothing else from the package, so data/, prompts/, llm/ and the stages
can all depend on it without pulling each other in.
"""
