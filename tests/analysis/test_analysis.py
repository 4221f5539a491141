"""Scores from a run store and the paper's result tables and figures, on a synthetic store."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from support.latex_page import compile_problems, needs_tex
from support.records import put
from support.synthetic_store import JUDGE, SECOND_JUDGE, build_store, served_for_real

from personalens_utils import analysis
from personalens_utils.labels import agreement
from personalens_utils.labels.agreement import AGREEMENT_DIMENSIONS
from personalens_utils.llm.offline import OFFLINE_LABEL
from personalens_utils.measures import scores
from personalens_utils.measures.display import provenance_note
from personalens_utils.outputs import plots
from personalens_utils.outputs.ids import OutputId
from personalens_utils.runstore.records import Dialogue, Judgment, Record
from personalens_utils.runstore.store import RunStore


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RunStore:
    return build_store(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def tidy(store) -> pd.DataFrame:
    return scores.load_scores(store, judge_model=JUDGE)


def _raw(store: RunStore, kind: type[Record]) -> list[dict]:
    return [json.loads(line) for line in store.path(kind).read_text().splitlines()]


def test_two_judges_must_be_told_apart(store):
    with pytest.raises(scores.ScoresError, match="judge_model"):
        scores.load_scores(store)
    with pytest.raises(scores.ScoresError, match="no judge model 'nobody'"):
        scores.load_scores(store, judge_model="nobody")


def test_errored_dialogues_are_left_out_and_missing_scores_stay_missing(store, tidy):
    errored = {d["id"] for d in _raw(store, Dialogue) if d["status"] == "error"}
    assert errored and not set(tidy["dialogue_id"]) & errored
    pers = tidy[tidy["dimension"] == "personalization"]
    missing = pers[pers["judgment_status"] == "missing"]
    assert len(missing) > 0 and missing["score"].isna().all()
    long = scores.aggregate(pers, ["assistant_model", "assistant_setting", "task_type"])
    assert long["n_missing"].sum() == len(missing)
    assert (long["n"] + long["n_missing"]).sum() == len(pers)


def test_task_completion_rate_matches_a_count_from_the_raw_files(store, tidy):
    dialogues = {d["id"]: d for d in _raw(store, Dialogue)}
    hits = [
        j["score"]
        for j in _raw(store, Judgment)
        if j["dimension"] == "task_completion"
        and j["judge_model"] == JUDGE
        and dialogues[j["dialogue_id"]]["assistant_model"] == "model-b"
        and dialogues[j["dialogue_id"]]["assistant_setting"] == "base"
        and dialogues[j["dialogue_id"]]["task_type"] == "SD"
    ]
    long = scores.aggregate(tidy, ["assistant_model", "assistant_setting", "task_type"], ["task_completion"])
    row = long.query("assistant_model == 'model-b' and assistant_setting == 'base' and task_type == 'SD'")
    assert row["mean"].item() == pytest.approx(100 * np.mean(hits))
    assert row["ci_low"].item() < row["mean"].item() < row["ci_high"].item()
    assert row["n"].item() == len(hits)


def test_duplicate_scenarios_are_refused(tmp_path):
    store = build_store(tmp_path, users=2, second_judge=False)
    dup = dict(store.records(Dialogue)[0], id="another-id", user_model="other-user-sim")
    put(store, Dialogue, [dup])
    with pytest.raises(scores.ScoresError, match="user_model="):
        scores.load_scores(store)
    assert len(scores.load_scores(store, user_model="other-user-sim")) == 0


def test_md_dialogues_count_toward_each_of_their_domains(tidy):
    md = tidy[(tidy["task_type"] == "MD") & (tidy["dimension"] == "personalization")]
    exploded = scores.explode_domains(md)
    assert len(exploded) == 3 * len(md)
    assert {"Events", "Calendar"} <= set(exploded["domain"])


def test_turn_frame_drops_unscored_turns(tidy):
    turns = scores.turn_frame(tidy)
    assert turns["score"].notna().all()
    raw = tidy[tidy["dimension"] == "turn_personalization"]["turn_scores"]
    assert len(turns) == sum(sum(s is not None for s in ts) for ts in raw)
    assert turns["turn"].min() == 1


def test_table3_rows_captions_and_offline_label(tidy):
    result = analysis.table3(tidy)
    assert list(result.frame["Assistant model"]) == ["model-a", "model-b", "model-c"]
    assert {"SD TCR", "SD P", "SD Nat.", "SD Coh.", "MD TCR", "MD P"} <= set(result.frame.columns)
    assert result.caption.endswith(f" Made with the {OFFLINE_LABEL}.")  # every role offline: as it always was
    assert "not counted as zero" in result.caption  # one P judgment is missing per setting
    means = result.data.query("task_type == 'SD' and dimension == 'task_completion'").set_index(
        "assistant_model"
    )
    assert means.loc["model-a", "mean"] > means.loc["model-c", "mean"]  # the synthetic model effect
    cell = result.frame.set_index("Assistant model").loc["model-b", "SD TCR"]
    row = means.loc["model-b"]
    assert cell == f"{row['mean']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"


def test_caption_names_a_real_backend_without_the_offline_label(tidy):
    relabelled = tidy.assign(user_backend="anthropic", assistant_backend="anthropic",
                             judge_backend="anthropic")
    caption = analysis.table3(relabelled).caption
    assert OFFLINE_LABEL not in caption and "Backend: anthropic." in caption


OFFLINE_ROLES = (f" Made in part with the {OFFLINE_LABEL}: the user agent and the judge are offline, so "
                 "every score is the offline judge's, a demonstration of the pipeline, not a model's "
                 "judgment; ")


def test_a_real_assistant_beside_an_offline_user_agent_and_judge_is_labelled_per_role(tidy):
    mixed = served_for_real(tidy)
    rows = OFFLINE_ROLES + "model-b (openai:model-b) is a real model; model-a and model-c are offline."
    assert analysis.table3(mixed).caption.endswith(rows)
    assert analysis.table12(mixed).caption.endswith(rows)
    alone = OFFLINE_ROLES + "model-b (openai:model-b) is a real model."
    fig4 = analysis.figure4(mixed, assistant_model="model-b")
    fig5 = analysis.figure5(scores.turn_frame(mixed), assistant_model="model-b")
    for figure in (fig4, fig5):
        assert figure.caption.endswith(alone)
        assert figure.figure.get_suptitle() == "Offline user agent, judge: rule-based"
    offline = analysis.figure4(mixed, assistant_model="model-a")  # every role of its numbers offline
    assert offline.caption.endswith(f" Made with the {OFFLINE_LABEL}.")
    assert offline.figure.get_suptitle() == plots.OFFLINE_NOTE


def test_a_caption_tells_reference_assistants_from_real_models_and_a_set_of_backends_says_in_part():
    made = scores.Provenance(
        frozenset({"offline", "openai"}),
        {"user agent": frozenset({("offline", "claude-3-sonnet-20240229")}),
         "judge": frozenset({("anthropic", "claude-3-5-sonnet-20241022")})},
        {"ref-dialogue-only": frozenset({("offline", "ref-dialogue-only")}),
         "smollm2": frozenset({("openai", "smollm2")})})
    assert provenance_note(made) == (
        f" Made in part with the {OFFLINE_LABEL}: the user agent is offline; the judge is "
        "anthropic:claude-3-5-sonnet-20241022; smollm2 (openai:smollm2) is a real model; ref-dialogue-only "
        "is an offline reference assistant.")
    assert provenance_note({"offline", "openai"}) == (
        f" Made in part with the {OFFLINE_LABEL}, in part with openai.")
    assert provenance_note({"offline", "python"}) == f" Made with the {OFFLINE_LABEL}."
    assert provenance_note({"anthropic"}) == " Backend: anthropic."


@needs_tex
def test_table3_labelled_per_role_compiles(tidy, tmp_path):
    table3 = analysis.table3(served_for_real(tidy))
    tex = table3.save(tmp_path, OutputId("table", 3, "assistant_models"))["tex"]
    assert "model-b (openai:model-b) is a real model" in tex.read_text(encoding="utf-8")
    assert compile_problems(tex) == []


def test_table12_reports_the_user_agent(tidy):
    result = analysis.table12(tidy)
    assert list(result.frame.columns) == ["Assistant model", "SD Nat. (U)", "SD Coh. (U)"]
    assert set(result.data["dimension"]) == {"naturalness_user", "coherence_user"}


def test_table4_paired_differences_match_a_hand_computation(tidy):
    result = analysis.table4(tidy, assistant_model="model-a")
    assert list(result.frame["Setting"]) == list(analysis.ABLATION_SETTINGS)
    data = result.data.set_index(["assistant_setting", "task_type", "dimension"])
    pers = tidy[
        (tidy["dimension"] == "personalization")
        & (tidy["task_type"] == "SD")
        & (tidy["assistant_model"] == "model-a")
    ]
    wide = pers.pivot_table(index="scenario_id", columns="assistant_setting", values="score").dropna()
    expected = (wide["base+I"] - wide["base"]).mean()
    row = data.loc[("base+I", "SD", "personalization")]
    assert row["diff_vs_base"] == pytest.approx(expected)
    assert row["n_pairs"] == len(wide)  # the scenario with a missing P is left out of the pairs
    assert row["diff_ci_low"] > 0 and row["p_permutation"] < 0.01
    vanilla = data.loc[("vanilla", "SD", "personalization")]  # same P rule as base: no difference
    assert vanilla["diff_vs_base"] == 0 and vanilla["p_permutation"] == 1.0
    assert (data["p_holm"].dropna() >= data["p_permutation"].dropna()).all()
    assert OFFLINE_LABEL in result.caption
    assert result.frame.set_index("Setting").loc["base", "SD ΔP"] == "(reference)"


def test_table4_requires_the_base_setting(tidy):
    with pytest.raises(ValueError, match="base"):
        analysis.table4(tidy[tidy["assistant_setting"] != "base"], assistant_model="model-a")


def _annotators(judge: pd.DataFrame, n: int, flip: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        for rec in judge.itertuples():
            score = rec.score
            if not np.isnan(score) and rng.random() < flip:
                scale = scores.SCALES[rec.dimension]
                score = float(rng.integers(scale.low, scale.high + 1))
            rows.append(
                {
                    "annotator": f"ann{k}",
                    "dialogue_id": rec.dialogue_id,
                    "dimension": rec.dimension,
                    "score": score,
                }
            )
    return pd.DataFrame(rows)


def test_table5_with_annotators_matches_the_agreement_functions(tidy):
    sample_ids = sorted(tidy["dialogue_id"].unique())[:100]
    judge = tidy[tidy["dialogue_id"].isin(sample_ids) & tidy["dimension"].isin(AGREEMENT_DIMENSIONS)]
    annotations = _annotators(judge, 3, 0.25, seed=1)
    result = analysis.table5(judge, annotations, judge_model=JUDGE, backend_names={"offline"})
    row = result.frame.set_index("Metric").loc["Personalization"]
    items = sorted(judge.loc[judge["dimension"] == "personalization", "dialogue_id"])
    ref = (
        judge[judge["dimension"] == "personalization"].set_index("dialogue_id").loc[items, "score"].to_numpy()
    )
    mats = [
        annotations[(annotations["annotator"] == f"ann{k}") & (annotations["dimension"] == "personalization")]
        .set_index("dialogue_id")
        .loc[items, "score"]
        .to_numpy()
        for k in range(3)
    ]
    kappas = [agreement.cohen_kappa(ref, m, categories=[1, 2, 3, 4]) for m in mats]
    assert row["Cohen's κ (judge vs annotator, mean)"] == pytest.approx(np.mean(kappas))
    assert row["Fleiss' κ (annotators)"] == pytest.approx(agreement.fleiss_kappa(np.vstack(mats)))
    assert row["Krippendorff's α (annotators)"] == pytest.approx(
        agreement.krippendorff_alpha(np.vstack(mats), level="ordinal", categories=[1, 2, 3, 4])
    )
    assert row["raters"] == 3 and row["items"] == 100
    assert "NO HUMAN" not in result.caption and OFFLINE_LABEL in result.caption
    tc = result.frame.set_index("Metric").loc["Task Completion"]
    assert tc["α level"] == "nominal"


def test_table5_without_annotations_says_so_and_uses_the_second_judge(store, tidy):
    second = scores.load_scores(store, judge_model=SECOND_JUDGE)
    first = tidy[tidy["dialogue_id"].isin(second["dialogue_id"])]
    result = analysis.table5(
        first,
        None,
        judge_model=JUDGE,
        second_judge=second,
        second_judge_model=SECOND_JUDGE,
        backend_names={"offline"},
    )
    assert result.caption.startswith("NO HUMAN ANNOTATIONS WERE GIVEN")
    kappas = result.frame["Cohen's κ (judge vs second judge)"]
    assert ((kappas > 0.3) & (kappas < 1)).all()  # the second judge re-scored 20% of items at random
    with pytest.raises(ValueError, match="no human annotations and no second judge"):
        analysis.table5(first, None, judge_model=JUDGE)


@needs_tex
def test_table5_prints_one_column_wide_with_a_legend_for_its_short_names(store, tidy, tmp_path):
    """Both forms of Table 5 (annotators, second judge) fit one ACL column at their natural size."""
    second = scores.load_scores(store, judge_model=SECOND_JUDGE)
    first = tidy[tidy["dialogue_id"].isin(second["dialogue_id"]) & tidy["dimension"].isin(
        AGREEMENT_DIMENSIONS)]
    human = analysis.table5(first, _annotators(first, 3, 0.25, seed=1), judge_model=JUDGE,
                            backend_names={"offline"})
    judges = analysis.table5(first, None, judge_model=JUDGE, second_judge=second,
                             second_judge_model=SECOND_JUDGE, backend_names={"offline"})
    legends = {"human": "judge vs annotator, mean", "judges": "judge vs second judge"}
    for name, result in (("human", human), ("judges", judges)):
        tex = result.save(tmp_path / name, OutputId("table", 5, "agreement"), float_format="{:.3f}")["tex"]
        latex = tex.read_text(encoding="utf-8")
        assert "\\begin{table}[t]" in latex, f"{name}: Table 5 fits one column"
        assert "Dimension & Cohen {\\ensuremath{\\kappa}} & Fleiss" in latex and "level" not in latex
        kappa = "{\\ensuremath{\\kappa}}"
        assert f"Cohen {kappa}: Cohen's {kappa}, {legends[name]}." in latex
        assert compile_problems(tex) == [], name


def test_figures_carry_the_offline_label_and_show_the_turn_trends(tidy):
    fig4 = analysis.figure4(tidy, assistant_model="model-a")
    assert OFFLINE_LABEL in fig4.caption  # and no title: the only text above the panels is the offline note
    assert " ".join(fig4.figure.get_suptitle().split()) == plots.OFFLINE_NOTE
    assert [t.get_text() for t in fig4.figure.axes[1].get_xticklabels()] == sorted(
        ["Alarm", "Books", "Messaging", "Movies", "Music"]
    )
    fig5 = analysis.figure5(
        scores.turn_frame(tidy), assistant_model="model-a", backend_names=scores.backends(tidy)
    )
    assert OFFLINE_LABEL in fig5.caption and fig5.figure.axes[0].get_title() == ""
    curves = fig5.data
    movies = curves[curves["series"] == "Movies"].sort_values("turn")["mean"].to_numpy()
    messaging = curves[curves["series"] == "Messaging"].sort_values("turn")["mean"].to_numpy()
    assert movies[-1] > movies[0] and messaging[-1] < messaging[0]
    assert (curves["n"] >= analysis.MIN_DIALOGUES_PER_TURN).all()
    radar = analysis.radar_chart(tidy)
    assert len(radar.data) == 5 * 3  # five domains, three models
    assert len(radar.figure.axes[0].get_lines()) == 3  # one polygon per assistant model
    assert OFFLINE_LABEL in radar.caption and radar.figure.axes[0].get_title() == ""
    drawn = tidy[(tidy["assistant_setting"] == "base") & (tidy["task_type"] == "SD")]
    assert f"{drawn['dialogue_id'].nunique()} judged dialogues" in radar.describe()


def test_a_tiny_nonzero_difference_is_not_printed_as_zero():
    from personalens_utils.measures.display import fmt_diff

    assert fmt_diff(0.004, 0.001, 0.008, 0.033) == "+0.004 [+0.001, +0.008], p=0.033"
    assert fmt_diff(0.0, 0.0, 0.0, 1.0) == "+0.00 [+0.00, +0.00], p=1.000"
    assert fmt_diff(-0.46, -0.7, -0.2, 0.0001) == "-0.46 [-0.70, -0.20], p<0.001"
