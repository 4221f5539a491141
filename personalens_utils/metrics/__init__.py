"""Measures over benchmark data, dialogues and judgments, one module a family."""
