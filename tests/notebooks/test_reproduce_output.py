"""What `make reproduce` prints (issue 20): each notebook's progress and the summary, and no warning
from the kernels it starts (ipykernel's plain-TCP warning came once per notebook). Read from the journeys'
reproduction (support.journeys); whether its notebooks all finished is journey (a)'s test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.journeys import load_steps
from support.notebook_output import TCP_WARNING

pytestmark = [pytest.mark.slow, pytest.mark.official, pytest.mark.timeout(600, func_only=True)]


def test_a_reproduction_prints_no_kernel_warning(journey):
    printed = Path(load_steps(journey)["reproduce"].log).read_text(encoding="utf-8")
    for name in ("06_analysis", "07_trust", "09_validity", "08_persona_bench", "10_robustness"):
        # not anchored at the line's start: the kernels' standard error shares the log and may end no line
        assert re.search(rf"\[reproduce\] \[\d+/\d+\] {name} done in \d+s$", printed, re.M), name
    assert "assistant_models=" not in printed  # the parameters are in the pass's parameters.log
    assert re.search(r"\[reproduce\] ran \d+ notebook\(s\)", printed), "no summary line"
    assert TCP_WARNING not in printed
    assert "[IPKernelApp] WARNING" not in printed
