"""The official protocol's prompts: its templates read from the user's own copy of the authors' code
(`templates`) and the prompt set built on them (`prompt_set`)."""
