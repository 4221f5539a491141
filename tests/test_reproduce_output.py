"""What a small offline `make reproduce` prints (issue 20): each notebook's progress and the summary,
and no warning from the kernels it starts (ipykernel's plain-TCP warning came once per notebook)."""

from __future__ import annotations

import pytest
from test_reproduce_failures import TCP_WARNING

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reproduced_checkout")]


def test_a_small_reproduction_prints_no_kernel_warning(reproduced_checkout):
    printed = (reproduced_checkout.parent / "reproduce.log").read_text(encoding="utf-8")
    assert "[reproduce] 06_analysis done in" in printed and "ran 9 notebook(s), 0 failed" in printed
    assert TCP_WARNING not in printed
    assert "[IPKernelApp] WARNING" not in printed
