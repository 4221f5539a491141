"""Progress bars: a stage with nothing to do draws none; a stage with work draws one that ends at 100%.
(That a notebook's executed copy keeps the finished bar is checked on a real reproduction in
test_notebook_defaults.py.)"""

from __future__ import annotations

from personalens_utils.llm import LLMClient
from personalens_utils.llm.progress import progress_bar


def test_nothing_to_do_draws_no_bar(capsys):
    assert progress_bar(total=0, desc="judging", unit="item").disable
    assert progress_bar(total=3, initial=3, desc="judging (batches)", unit="request").disable
    bar = progress_bar(total=3, desc="judging", unit="item")
    assert not bar.disable
    bar.close()
    assert progress_bar(total=3, desc="judging", unit="item", disable=True).disable
    capsys.readouterr()


def test_the_pool_draws_a_bar_only_for_work_and_finishes_it(capsys, tmp_path):
    client = LLMClient("offline", cache_dir=str(tmp_path), stage="judging")

    async def one() -> int:
        return 1

    try:
        assert client.run_all([]) == []
        assert capsys.readouterr().err == ""
        assert client.run_all([one, one]) == [1, 1]
        drawn = capsys.readouterr().err
        assert "judging" in drawn and "2/2" in drawn and "100%" in drawn
    finally:
        client.close()
