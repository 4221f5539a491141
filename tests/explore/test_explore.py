"""The explorer, the side-by-side view and the annotation widget driven as a user would, and the
notebooks' HTML displays (records, stage reports, tables)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from support.explorer_store import DIALOGUES, LONG, build, chat, judgment
from support.records import dialogue_json, put
from support.synthetic_store import build_benchmark

from personalens_utils import analysis
from personalens_utils.base.paths import project_root
from personalens_utils.explore import Annotator, annotate, explore, side_by_side
from personalens_utils.explore import widgets as widgets_module
from personalens_utils.explore.catalog import DialogueView
from personalens_utils.explore.views import dialogue_page, turn_notes
from personalens_utils.judging import DIMENSIONS
from personalens_utils.judging.answers import combine, score_fields
from personalens_utils.judging.offline import mentions
from personalens_utils.labels import AnnotationError
from personalens_utils.labels.reading import read_sheets
from personalens_utils.labels.sheets import RATED, SHEET_COLUMNS, export_sheet, read_table, write_table
from personalens_utils.llm import CallKind, Message, Request
from personalens_utils.llm.client import Clients
from personalens_utils.measures.scores import load_scores
from personalens_utils.outputs.display import UsageTable, frame_html
from personalens_utils.outputs.tables import Source, TableResult
from personalens_utils.runstore.engine import StageReport
from personalens_utils.runstore.identity import Variant
from personalens_utils.runstore.records import Dialogue, Judgment


@pytest.fixture
def store(tmp_path):
    return build(tmp_path / "run")


@pytest.fixture(scope="module")
def benchmark():
    return build_benchmark(3)


def plain(markup: str) -> str:
    """The HTML without its inline styles (what the assertions read)."""
    return re.sub(r' style="[^"]*"', "", markup)


def _shown(explorer) -> list[str]:
    return [value for _, value in explorer.dialogue.options]


def test_filters_narrow_the_dialogue_list(store, benchmark):
    view = explore(store, benchmark=benchmark)
    assert _shown(view) == ["d-base", "d-plus-i", "d-music", "d-md"]  # user, task, assistant, setting
    assert view.count.value == "4 of 4 dialogues"
    assert {box.label for box in view.filters.values()} == {"(any)"}  # an open filter says so
    view.set_filters(assistant_model="model-b")
    assert _shown(view) == ["d-music"] and view.dialogue.value == "d-music"
    view.set_filters(assistant_model=None, domain="Movies")
    assert _shown(view) == ["d-base", "d-plus-i", "d-md"]
    view.set_filters(task_type="SD", setting="base")
    assert _shown(view) == ["d-base"]
    view.set_filters(task_type=None, setting=None, domain=None, user=1)
    assert _shown(view) == ["d-base", "d-plus-i"]
    view.set_filters(user=None, dimension="personalization")
    assert (view.score.min, view.score.max, view.score.disabled) == (1, 4, False)  # the dimension's scale
    view.set_filters(score_range=(3, 4))
    assert _shown(view) == ["d-base", "d-plus-i"]
    view.set_filters(score_range=(1, 2))
    assert _shown(view) == ["d-music", "d-md"]
    view.set_filters(dimension="naturalness_assistant", score_range=(1, 5))
    assert _shown(view) == []  # its only judgment has no score: never counted as any score
    assert "No dialogue passes these filters" in view.page.value
    view.set_filters(dimension="turn_personalization", score_range=(2.75, 3.25))  # a mean of turn scores
    assert _shown(view) == ["d-base"] and view.score.step == 0.25
    view.set_filters(dimension=None)
    assert len(_shown(view)) == 4 and view.score.disabled and view.filters["dimension"].label == "(any)"
    with pytest.raises(ValueError, match=r"model-z.*not in this run store"):
        view.set_filters(assistant_model="model-z")
    with pytest.raises(ValueError, match="unknown explorer filters"):
        view.set_filters(colour="red")


def test_the_page_shows_transcript_profile_applied_preferences_and_every_judgment(store, benchmark):
    view = explore(store, benchmark=benchmark)
    view.select("d-base")
    page = plain(view.page.value)
    assert view.page.value == view.html() and 'data-dialogue="d-base"' in page
    for turn in DIALOGUES["d-base"]["turns"][:2] + DIALOGUES["d-base"]["turns"][3:]:
        assert turn["content"] in page
    assert "Sounds good &lt;b&gt;bold&lt;/b&gt; &amp; more" in page and "<b>bold</b>" not in page
    heads = re.findall(r'<div class="pl-turn-head">(\w+) · turn (\d+)</div>', page)
    assert heads == [("user", "1"), ("assistant", "1"), ("user", "2"), ("assistant", "2")]
    # the whole explanation of every judgment, with judge, parse status and score
    for dimension in ("personalization", "task_completion"):
        assert f"{dimension} of d-base: {LONG}" in page
    assert "scored · judge judge-1 (offline rules) · prompts" in page and "answer(s)" not in page
    assert "asked again" not in page and "parsed" not in page  # every answer of d-base was read at once
    # the task's relevant preference, its values, and where the assistant applied one (whole words:
    # "jazzy" in the last turn is not "jazz")
    relevant = re.search(r'<table class="pl-table pl-fit pl-relevant">.*?</table>', page).group(0)
    assert "Preferred Genres" in relevant and "jazz, drama" in relevant
    assert "jazz: turn 1<br>drama: turn 2" in relevant
    assert page.count("applies Preferred Genres: jazz") == 1
    assert page.count("applies Preferred Genres: drama") == 1
    # turn-level scores beside their turns: turn 1's after the first assistant message, before user turn 2
    first_reply = page.index("How about a jazz documentary?")
    note_1 = page.index('data-turn-score="1"')
    user_2 = page.index("Sounds good")
    assert first_reply < note_1 < user_2 and "offered jazz unprompted" in page[note_1:user_2]
    note_2 = page.index('data-turn-score="2"')
    assert note_2 > page.index("Then a drama after it") and "no valid score" in page[note_2:note_2 + 400]


def test_a_missing_judgment_shows_its_status_and_never_a_score(store, benchmark):
    view = explore(store, benchmark=benchmark)
    view.select("d-music")
    block = re.search(r'<div class="pl-judgment" data-dimension="naturalness_assistant".*?</details></div>',
                      plain(view.page.value)).group(0)
    assert 'data-status="missing"' in block and "no score" in block
    assert "(missing) · asked again: the first answer had no readable score" in block
    assert "no valid score: the answer had no &#x27;Naturalness Score:&#x27; line" in block


def test_mentions_use_the_offline_judges_whole_word_reading():
    context = {"task": {"relevant_preferences": ["Preferred Genres"]},
               "preferences": {"Movies": {"Preferred Genres": ["jazz", "Drama"], "Other": "jazz"}},
               "dialogue": chat("I like DRAMA.", "Some jazzy tunes?", "No.", "A Jazz night then.")}
    found = [(m.index, m.role, m.value) for m in mentions(context)]
    assert found == [(0, "user", "Drama"), (3, "assistant", "jazz")]


def test_a_value_held_in_two_domains_is_one_badge_on_its_turn(store):
    """A user with the same price range for travel and restaurants: two mentions, one badge per turn."""
    dialogue = next(d for d in store.read(Dialogue) if d.id == "d-md")
    context = {"task": {"relevant_preferences": ["Price Range"]},
               "preferences": {domain: {"Price Range": "Moderate"} for domain in ("Travel", "Restaurants")},
               "dialogue": chat("Plan my evening.", "Something moderate for the hotel and the dinner.")}
    found = tuple(mentions(context))
    assert [(m.index, m.domain) for m in found] == [(1, "Restaurants"), (1, "Travel")]
    twice = {**context, "task": {"relevant_preferences": ["Price Range", "Price Range"]}}
    assert tuple(mentions(twice)) == found  # a type named twice by the task is not mentioned twice
    page = plain(dialogue_page(DialogueView(dialogue, (), context, mentions=found)))
    assert page.count("applies Price Range: Moderate") == 1
    relevant = re.search(r'<table class="pl-table pl-fit pl-relevant">.*?</table>', page).group(0)
    assert relevant.count("Moderate: turn 1") == 2  # the profile table still lists both domains


def test_explorer_and_side_by_side_fit_the_output_width(store, benchmark):
    """Nothing wider than the output: widgets span 100%, long text wraps, wide tables scroll in their box.
    Every style is inline (an untrusted executed copy drops <style> blocks)."""
    view = explore(store, benchmark=benchmark)
    view.select("d-base")
    compare = side_by_side(store, benchmark=benchmark)
    for widget in (view, view.dialogue, view.page, compare, compare.page):
        assert (widget.layout.width, widget.layout.max_width) == ("auto", "100%")
    assert compare.left.layout.width == "auto" and compare.left.layout.flex == "1 1 0"
    for markup, root in ((view.page.value, "pl-page"), (compare.page.value, "pl-compare")):
        assert "<style" not in markup
        top = re.match(rf'<div class="{root}"[^>]* style="([^"]*)"', markup).group(1)
        assert "overflow-wrap: anywhere" in top and "white-space: normal" in top
        scrolls = re.findall(r'<div class="pl-scroll" style="([^"]*)"', markup)
        assert scrolls and all("overflow-x: auto" in s and "contain: inline-size" in s for s in scrolls)
        assert "line-height: 1.4" in top  # not the 28 px a widget's HTML box sets
        relevant = re.search(r'<table class="pl-table pl-fit pl-relevant" style="([^"]*)"', markup).group(1)
        assert "width: 100%" in relevant and "table-layout: fixed" in relevant  # fits, never scrolls
        wrapped = (r'<th class="pl-fit-cell" style="[^"]*white-space: nowrap[^"]*white-space: normal; '
                   r'overflow-wrap: anywhere"')
        assert re.search(wrapped, markup)  # the long "applied in ..." headers wrap
        cell = r'<td class="pl-fit-cell" style="[^"]*overflow-wrap: normal[^"]*overflow-wrap: anywhere"'
        assert re.search(cell, markup)  # a word too long for its column breaks rather than spill over
        explanations = re.findall(r'<div class="pl-explanation[^"]*" style="([^"]*)"', markup)
        assert explanations and all("line-height: 1.4" in e for e in explanations)
        assert not re.search(r"(?<![-\w])width: \d+(px|em)", markup)  # no fixed width anywhere
    grid = re.search(r'<div class="pl-side" style="([^"]*)"', compare.page.value).group(1)
    assert "grid-template-columns: minmax(0, 1fr) minmax(0, 1fr)" in grid


def test_without_a_benchmark_or_dialogues_the_explorer_says_what_to_do(store, tmp_path):
    view = explore(store)
    assert "Profile not shown: no benchmark was given" in view.page.value
    assert "How about a jazz documentary?" in view.page.value  # the transcript still shows
    empty = explore(tmp_path / "empty")
    assert empty.count.value == "0 of 0 dialogues"
    assert "holds no dialogues yet: run notebook 03" in empty.page.value
    assert "No scenario of this run store has two dialogues" in side_by_side(tmp_path / "empty").html()


def test_the_display_carries_a_static_page_for_copies_without_a_kernel(store, benchmark):
    view = explore(store, benchmark=benchmark, judge_model="judge-1")
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"] == view.page.value and 'class="pl-page"' in bundle["text/html"]
    # an untrusted copy drops <style> blocks: every look is written inline on its element
    assert "<style" not in bundle["text/html"]
    first_turn = r'class="pl-turn pl-turn-user" data-turn="1" style="[^"]*background-color'
    assert re.search(first_turn, bundle["text/html"])
    classes = {c for w in (view, view.dialogue, view.page, view.score, *view.filters.values())
               for c in w._dom_classes}
    assert {"pl-explorer", "pl-explorer-dialogue-select", "pl-explorer-page", "pl-explorer-score",
            "pl-explorer-dimension", "pl-explorer-assistant_model"} <= classes


def test_side_by_side_aligns_turns_and_puts_scores_beside_each(store, benchmark):
    view = side_by_side(store, benchmark=benchmark)
    assert [v for v in view.scenario.options] == ["user1/SD-Movies-task-1"]  # the only scenario run twice
    view.choose("user1/SD-Movies-task-1", left=lambda d: d.assistant_setting == "base",
                right=lambda d: d.assistant_setting == "base+I")
    page = plain(view.page.value)
    assert view.page.value == view.html() and 'class="pl-compare"' in page
    cell = (r'<div class="pl-compare-turn pl-side-cell" data-turn="(\d+)">(.*?)</div>'
            r'(?=<div class="pl-compare-turn|<h4>|$)')
    rows = re.findall(cell, page, flags=re.S)
    numbers = [n for n, _ in rows]
    assert numbers == ["1", "1", "2", "2", "3", "3"]  # one row per turn: left cell, right cell
    left_1, right_1 = rows[0][1], rows[1][1]
    assert "How about a jazz documentary?" in left_1 and "You liked drama before" in right_1
    assert "Thanks, bye." in rows[5][1] and "pl-turn" not in rows[4][1]  # base ended after two turns
    relevant = re.search(r'<table class="pl-table pl-fit pl-relevant">.*?</table>', page).group(0)
    assert '<th class="pl-fit-cell">applied in model-a · base (whole-word match)</th>' in relevant
    assert ('<td class="pl-fit-cell">jazz: turn 1<br>drama: turn 2</td><td class="pl-fit-cell">drama: turn 1'
            "</td>") in relevant  # each run's own
    judged = page[page.index("<h4>Judgments</h4>"):]
    assert judged.index("personalization of d-base") < judged.index("personalization of d-plus-i")
    assert f"personalization of d-plus-i: {LONG}" in judged
    assert "Personalization (turns) (judge-1): not judged" in judged  # only the left one was scored per turn
    with pytest.raises(ValueError, match="has no such run"):
        view.choose("user1/SD-Movies-task-1", left="d-base", right="d-music")


def test_side_by_side_says_where_the_shorter_dialogue_ended_instead_of_a_blank_cell(store, benchmark):
    view = side_by_side(store, benchmark=benchmark)
    view.choose("user1/SD-Movies-task-1", left=lambda d: d.assistant_setting == "base",
                right=lambda d: d.assistant_setting == "base+I")
    page = plain(view.page.value)
    cell = (r'<div class="pl-compare-turn pl-side-cell" data-turn="(\d+)">(.*?)</div>'
            r'(?=<div class="pl-compare-turn|<h4>|$)')
    rows = re.findall(cell, page, flags=re.S)
    assert rows[4] == ("3", '<div class="pl-muted pl-ended">ended at turn 2</div>')  # base: two turns
    assert page.count("ended at turn") == 1  # the longer dialogue's cells are its turns


# -- annotation ------------------------------------------------------------------------------------------


@pytest.fixture
def exported(store, benchmark, tmp_path):
    return export_sheet(store, benchmark, tmp_path / "annotation", n=3, seed=0)


def _ratings(tc: str, p: str) -> dict[str, str]:
    return dict(task_completion=tc, personalization=p, naturalness_user="4", naturalness_assistant="5",
                coherence_user="4", coherence_assistant="3")


def test_annotation_is_validated_saved_after_every_item_and_resumed(exported):
    folder = exported["sheet"].parent
    with pytest.raises(AnnotationError, match="pass annotator="):
        annotate(folder)
    widget = annotate(folder, annotator="Alice B")
    sheet = folder / "annotator_Alice_B.csv"
    assert widget.path == sheet and sheet.read_bytes() == exported["sheet"].read_bytes()
    assert widget.index == 0 and "0 of 3 dialogues rated" in widget.progress.value
    assert "Column `personalization` (a whole number 1-4)" in widget.guide.value  # the judge's guidelines
    first_id = widget.rows[0]["dialogue_id"]
    assert f'data-dialogue="{first_id}"' in widget.item.value
    # an invalid score is refused with a message, and nothing is written
    before = sheet.read_bytes()
    widget.enter(**{**_ratings("yes", "7"), "coherence_user": "x"})
    assert widget.save() is False and widget.index == 0
    assert "&#x27;7&#x27; is not a whole number from 1 to 4" in widget.message.value
    assert "&#x27;x&#x27; is not a number (1-5 expected)" in widget.message.value
    assert sheet.read_bytes() == before
    widget.enter(**dict.fromkeys(RATED, ""))
    assert widget.save() is False and "no rating entered" in widget.message.value
    widget.annotator.value = "Bob"  # a second name on one sheet would make Table 5 refuse it
    widget.enter(**_ratings("yes", "3"))
    header, rows, _ = read_table(sheet)
    rows[2]["annotator"] = "Alice B"  # another item of the sheet is Alice's
    write_table(sheet, header, rows)
    widget.rows = rows
    assert widget.save() is False and "holds the ratings of Alice B" in widget.message.value
    sheet.write_bytes(before)
    widget.rows = read_table(sheet)[1]
    widget.annotator.value = "Alice B"
    widget.enter(**dict.fromkeys(RATED, ""))
    assert widget.save() is False and "no rating entered" in widget.message.value
    # valid entries are saved at once, in the sheet's own format
    widget.enter(**_ratings("yes", "3"), notes="clear, \"quoted\" note")
    assert widget.save() is True and widget.index == 1
    saved = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    assert list(saved.columns) == list(SHEET_COLUMNS)
    assert saved.loc[0, ["task_completion", "personalization", "annotator", "notes"]].tolist() == [
        "True", "3", "Alice B", 'clear, "quoted" note']
    assert (saved.loc[1:, list(RATED)] == "").all().all()
    assert not list(folder.glob(".*.tmp"))  # the atomic write left no temporary file
    # the tab is closed half-way; a new widget on the same sheet goes on at the first unrated item
    del widget
    again = annotate(folder, annotator="Alice B")
    assert again.index == 1 and "1 of 3 dialogues rated" in again.progress.value
    assert again.rows[0]["personalization"] == "3" and again.rows[0]["dialogue_id"] == first_id
    again.go(0)
    assert again.fields["personalization"].value == "3"  # what was stored comes back into the fields
    again.go(1)
    again.enter(**_ratings("no", "1"))
    assert again.save()
    again.enter(**_ratings("1", "2"))
    assert again.save() and again.index == 3 and "end of the sheet" in again.progress.value
    # two widgets open on one sheet (a cell run twice): each save keeps what the other saved
    stale, fresh = annotate(sheet), annotate(sheet)
    fresh.go(0)
    fresh.enter(personalization="2")
    assert fresh.save()
    stale.go(1)
    stale.enter(personalization="4")
    assert stale.save()
    assert [r["personalization"] for r in read_table(sheet)[1]] == ["2", "4", "2"]
    ratings = read_sheets(str(folder / "annotator_*.csv"), manifest=exported["manifest"])
    assert set(ratings["annotator"]) == {"Alice B"} and len(ratings) == 3 * 6
    assert ratings.groupby("dialogue_id")["score"].count().tolist() == [6, 6, 6]


def test_a_sheet_filled_in_the_widget_gives_table5_what_a_spreadsheet_gives(exported, store):
    folder = exported["sheet"].parent
    blank = pd.read_csv(exported["sheet"], dtype=str, keep_default_na=False)
    rng = np.random.default_rng(5)
    values = [_ratings(str(rng.choice(["True", "False"])), str(rng.integers(1, 5))) for _ in blank.index]
    widget = Annotator(exported["sheet"], annotator="ann1")
    for row in values:
        widget.enter(**row)
        assert widget.save()
    by_hand = blank.assign(annotator="ann1")
    for i, row in enumerate(values):
        for column, value in row.items():
            by_hand.loc[i, column] = value
    (folder / "spreadsheet").mkdir()
    by_hand.to_csv(folder / "spreadsheet" / "ann1.csv", index=False)
    from_widget = read_sheets([folder / "annotator_ann1.csv"], manifest=exported["manifest"])
    from_csv = read_sheets([folder / "spreadsheet" / "ann1.csv"], manifest=exported["manifest"])
    pd.testing.assert_frame_equal(from_widget, from_csv)
    judge = load_scores(store, judge_model="judge-1")
    table = analysis.table5(judge, from_widget, judge_model="judge-1", backend_names={"offline"})
    assert table.frame.equals(analysis.table5(judge, from_csv, judge_model="judge-1",
                                              backend_names={"offline"}).frame)


# -- HTML displays ---------------------------------------------------------------------------------------


def test_table_display_has_no_index_formats_floats_blanks_undefined_and_escapes():
    frame = pd.DataFrame({"Metric <x>": ["a & b", "c"], "κ": [0.123456, float("nan")], "items": [3, 4],
                          "cost_usd": [0.000123, 1.5]}, index=[7, 9])
    result = TableResult(frame, "Caption with <tags> & more.", Source.of("store", 2, "rows"), precision=3)
    html = plain(result._repr_html_())
    assert "Caption with &lt;tags&gt; &amp; more." in html and "<tags>" not in html
    assert "Metric &lt;x&gt;" in html and "a &amp; b" in html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert cells == ["a &amp; b", "0.123", "3", "0.0001", "c", "", "4", "1.5000"]  # no index, NaN blank
    assert "nan" not in html.lower().replace("nanoseconds", "") and ">7<" not in html
    assert "overflow-x: auto" in result._repr_html_() and 'class="pl-scroll"' in html
    pivot = plain(frame_html(pd.DataFrame({"m": [1.0]}, index=pd.Index(["SD"], name="task_type"))))
    assert "<th>task_type</th>" in pivot and "<td>SD</td>" in pivot  # a named index means something
    assert "No rows." in frame_html(pd.DataFrame(columns=["a", "b"]))
    with pd.option_context("display.max_rows", 20, "display.min_rows", 6):
        long = plain(frame_html(pd.DataFrame({"n": range(1000)})))
    assert re.findall(r"<td[^>]*>(\d+)</td>", long) == ["0", "1", "2", "997", "998", "999"]
    assert "… 994 more rows, 1000 in all …" in long
    small = plain(frame_html(pd.DataFrame({"p": [0.000123, 0.0, 0.5]})))
    assert re.findall(r"<td[^>]*>(.*?)</td>", small) == ["0.00012", "0.00", "0.50"]  # not a false zero


def test_table5_shows_a_blank_where_its_caption_promises_one():
    ids = [f"d{i}" for i in range(6)]
    dimensions = ["task_completion"] * 6 + ["personalization"] * 6
    judge = pd.DataFrame({"dialogue_id": ids * 2, "dimension": dimensions,
                          "score": [1.0] * 6 + [1.0, 2.0, 3.0, 4.0, 2.0, 3.0]})
    second = judge.copy()
    result = analysis.table5(judge, None, judge_model="judge-1", second_judge=second,
                             second_judge_model="judge-2", backend_names={"offline"})
    assert result.frame.select_dtypes("number").isna().any().any()  # every TC rating is the same value
    assert "A blank cell is undefined" in result.caption
    html = plain(result._repr_html_())
    assert "nan" not in html.lower() and '<td class="pl-num"></td>' in html
    assert re.search(r"<td class=\"pl-num\">1\.000</td>", html)  # the table's own precision: three decimals


def test_stage_report_display_is_one_line_when_there_was_nothing_to_do():
    idle = StageReport("judging", already_done=12, shard="1/2")
    assert idle._repr_html_() == ('<div class="pl-stage pl-stage-idle">judging (shard 1/2): nothing to do, '
                                  "12 items already stored.</div>")
    busy = StageReport("judging", planned=3, finished=2, errors=1, statuses=Counter(ok=2, error=1),
                       cost_usd=0.00042)
    html = plain(busy._repr_html_())
    assert "judging complete: 3 records stored (1 errors)" in html and "<table" in html
    assert "<td class=\"pl-num\">0.0004</td>" in html and "<th></th>" not in html


def test_usage_of_a_stage_with_nothing_to_do_is_one_line_and_every_notebook_shows_it_so():
    """Rerunning 03-06 after a finished run makes no model call: one line, never an empty table."""
    clients = Clients("offline", progress=False)
    try:
        idle = UsageTable(clients.usage_frame("judging"), "judging")
        assert plain(idle._repr_html_()) == ('<div class="pl-usage pl-usage-none pl-muted">judging: no model '
                                             "calls in this session (nothing to do, or nothing that needed "
                                             "a model).</div>")
        assert repr(idle) == idle.line() and "<table" not in idle._repr_html_()
        spec = clients.spec("Claude 3 Sonnet")
        clients.client(spec).complete(Request(CallKind.USER_TURN, (Message("user", "hi"),), model=spec.model))
        busy = UsageTable(clients.usage_frame())
        html = plain(busy._repr_html_())
        assert "<table" in html and "user agent" in html and "no model calls" not in html
    finally:
        clients.close()
    for name in ("03_simulation", "04_judging", "05_ablation", "06_analysis"):
        source = (project_root() / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8")
        assert "session.usage(" in source and "usage_frame" not in source, name


def test_records_render_as_html_with_every_text_escaped(store):
    dialogue = next(d for d in store.read(Dialogue) if d.id == "d-base")
    html = plain(dialogue._repr_html_())
    assert "Sounds good &lt;b&gt;bold&lt;/b&gt; &amp; more" in html and "<b>bold</b>" not in html
    assert html.count('class="pl-turn ') == 4 and "assistant · turn 2" in html
    assert "<th>assistant_setting</th><td>base</td>" in html
    judgment = next(j for j in store.read(Judgment) if j.id == "d-base-personalization")
    html = plain(judgment._repr_html_())
    assert f"personalization of d-base: {LONG}" in html and "<th>score</th><td>4.00</td>" in html
    missing = next(j for j in store.read(Judgment) if j.status == "missing")
    assert "<th>score</th><td></td>" in plain(missing._repr_html_())  # no score: blank, never a number


def test_turn_notes_read_the_explanation_the_judging_stage_writes():
    dimension = DIMENSIONS["turn_personalization"]
    answers = [combine(dimension, "Justification: offered jazz first.\nPersonalization Score: 3", None),
               combine(dimension, "I cannot say.", None)]
    fields = score_fields(dimension, answers)
    judgment = Judgment(dialogue_id="d", dimension=dimension.name, judge_model="j", variant=Variant("v1"),
                        backend="offline", **{**fields, "turn_scores": tuple(fields["turn_scores"])})
    notes = turn_notes(judgment)
    assert notes[1] == "Justification: offered jazz first.\nPersonalization Score: 3"
    assert notes[2].startswith("no valid score:") and set(notes) == {1, 2}


def test_turn_notes_are_written_once_single_spaced_and_no_model_is_named_for_offline_answers(store):
    same = "Justification: none of the relevant values came up.\n\n\nScore reasoning follows."
    put(store, Judgment, [judgment("d-plus-i", "turn_personalization", 1.0, turn_scores=[1.0, 1.0],
                                    explanation="\n".join(f"turn {k}: {same}" for k in (1, 2)))])
    view = explore(store)
    view.select("d-plus-i")
    page = plain(view.page.value)
    notes = [page[page.index(f'data-turn-score="{k}"'):][:400] for k in (1, 2)]
    assert "none of the relevant values came up.\nScore reasoning" in notes[0]  # one line break, no blank
    assert all("the same note as turn 1" in note and "came up" not in note for note in notes[1:])
    assert "(offline rules)" in page and "claude" not in page.lower()  # the rules answered, not a model


def test_a_long_dialogue_list_is_paged_and_searched_and_dimensions_read_as_words(store, monkeypatch):
    monkeypatch.setattr(widgets_module, "SHOWN", 3)  # a store of 4 stands for one of 26,134
    view = explore(store)
    assert _shown(view) == ["d-base", "d-plus-i", "d-music"] and view.later.disabled is False
    assert view.count.value == "4 of 4 dialogues; showing 1-3" and view.earlier.disabled
    view.later.click()
    assert _shown(view) == ["d-md"] and view.later.disabled
    assert view.count.value == "4 of 4 dialogues; showing 4-4"
    view.earlier.click()
    view.select("d-md")  # a dialogue on another page: the list turns to it
    assert _shown(view) == ["d-md"] and 'data-dialogue="d-md"' in view.page.value
    view.search.value = "MUSIC"
    assert _shown(view) == ["d-music"] and view.count.value == "1 of 4 dialogues"
    view.search.value = "model-a 2 turns"  # every word, anywhere in the line
    assert _shown(view) == ["d-base"]
    labels = dict((value, label) for label, value in view.filters["dimension"].options)
    assert labels["naturalness_assistant"] == "Naturalness (A)" and labels["task_completion"] == \
        "Task Completion"
    view.set_filters(dimension="naturalness_assistant")  # filters still take the ids
    assert view.filters["dimension"].label == "Naturalness (A)"


def test_side_by_side_offers_finished_dialogues_the_judge_scored_not_every_run_ever_made(store):
    base = {**DIALOGUES["d-base"]}
    put(store, Dialogue, [dialogue_json("d-error", **{**base, "assistant_setting": "base+S"}, status="error",
                                        error="HTTP 500"),
                          dialogue_json("d-unjudged", **{**base, "assistant_setting": "base+D"})])
    assert {d.id for d in side_by_side(store).catalog.runs_of("user1/SD-Movies-task-1")} == {
        "d-base", "d-plus-i", "d-unjudged"}  # the errored run is no side to compare
    view = side_by_side(store, judge_model="judge-1")
    assert [value for _, value in view.left.options] == ["d-base", "d-plus-i"]  # what judge-1 scored
    assert list(view.scenario.options) == ["user1/SD-Movies-task-1"]


def test_judgments_are_headed_by_name_and_say_asked_again_only_when_an_answer_was_asked_for_twice(store):
    put(store, Judgment, [
        judgment("d-md", "turn_personalization", 2.0, turn_scores=[2.0, 2.0, 2.0], attempts=3,
                  explanation="turn 1: a\nturn 2: b\nturn 3: c"),
        judgment("d-md", "coherence_user", 4.0, attempts=1),
        judgment("d-plus-i", "turn_personalization", 2.0, turn_scores=[2.0, 2.0, 2.0], attempts=5,
                  explanation="turn 1: a\nturn 2: b\nturn 3: c"),
    ])
    view = explore(store)
    view.select("d-md")
    page = plain(view.page.value)
    head = r'<div class="pl-judgment" data-dimension="(\w+)"[^>]*><b title="\1">([^<]+)</b>'
    heads = re.findall(head, page)
    assert ("turn_personalization", "Personalization (turns)") in heads
    assert ("coherence_user", "Coherence (U)") in heads and ("task_completion", "Task Completion") in heads
    assert "(U) rates the user agent" in page
    beside = r'data-turn-score="1"><b title="turn_personalization">Personalization \(turns\)</b>'
    assert re.search(beside, page)
    assert "asked again" not in page and "answers" not in page  # one answer a turn is the usual
    view.select("d-plus-i")
    assert "asked again on 2 of 3 turns: the first answer had no readable score" in plain(view.page.value)
