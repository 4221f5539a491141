"""Benchmark generation (paper §2.1-2.2): profiles, tasks and situations, written in the official layout.

`generate_benchmark(GenerationConfig(...))` runs the whole stage; the parsers in `parsing` and the
request builders in `requests` are usable on their own.
"""

from personalens_utils.generation.parsing import AnswerError
from personalens_utils.generation.runner import (
    GenerationConfig,
    GenerationResult,
    generate_benchmark,
    load_users,
)

__all__ = ["AnswerError", "GenerationConfig", "GenerationResult", "generate_benchmark", "load_users"]
