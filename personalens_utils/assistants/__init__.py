"""Assistants under test written in Python (the `python:` spec; `llm.python_assistant` has the protocol).

`retrieval.RetrievalAssistant` is the worked example: it ranks the user's past-interaction notes by
BM25 relevance to what the user has asked and shows the model only the best few.
"""
