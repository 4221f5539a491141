"""What a small offline `make reproduce` prints (issue 20): each notebook's progress and the summary,
and no warning from the kernels it starts (ipykernel's plain-TCP warning came once per notebook)."""

from __future__ import annotations

import re

import pytest
from support.notebook_output import TCP_WARNING

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reproduced_checkout")]


def test_a_small_reproduction_prints_no_kernel_warning(reproduced_checkout):
    printed = (reproduced_checkout.parent / "reproduce.log").read_text(encoding="utf-8")
    for name in ("06_analysis", "07_trust", "09_validity", "08_persona_bench"):
        assert re.search(rf"^\[reproduce\] \[\d+/12\] {name} done in \d+s$", printed, re.M), name
    assert "assistant_models=" not in printed  # the parameters are in the pass's parameters.log
    assert "ran 12 notebook(s): 12 ok, 0 failed" in printed  # 01, 03 for four assistants, 04, 02, 05-09
    assert TCP_WARNING not in printed
    assert "[IPKernelApp] WARNING" not in printed
