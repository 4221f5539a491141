"""Robustness of the benchmark's conclusions to the user agent and the judge (issue 41, notebook 10):
tables R1-R5 and a ranking figure over a sensitivity grid's tidy score frame."""

from personalens_utils.robustness.condition_table import condition_table
from personalens_utils.robustness.figures import ranking_figure
from personalens_utils.robustness.ordering import kendalls_w, pairwise_order_table, w_text
from personalens_utils.robustness.reliability import pass_k_table
from personalens_utils.robustness.stress import stress_gap_table
from personalens_utils.robustness.variance_split import variance_split

__all__ = ["condition_table", "kendalls_w", "pairwise_order_table", "pass_k_table", "ranking_figure",
           "stress_gap_table", "variance_split", "w_text"]
