"""How far to trust a number: uncertainty that respects how a PersonaLens run is built.

A run nests its judgments: users, tasks of each user, simulation repeats of each scenario, judge
samples of each dialogue. Judgments of one user are not independent, so intervals and plans count
users, not dialogues, as the unit that varies.

- `design`: the tidy score frame as one row per judgment with `user`, `task`, `sample`,
  `judge_sample`, `assistant`, `score` (the frame every other module reads);
- `bootstrap`: cluster-bootstrap intervals (users resampled, their tasks and repeats kept together)
  and paired differences between assistants or settings on the same scenarios;
- `differences`: every pair of assistant models compared on their shared scenarios (a table);
- `variance`: the share of each metric's variance due to users, tasks, simulation and judging;
- `power`: the smallest difference a design detects, the users it needs, and what it costs;
- `report_card`, `probes`: the judge report card, its checks and the re-judging probes they need
  (another user's profile, padded assistant turns), stored apart from ordinary judgments;
- `probe_design`: the small design notebook 07 probes, and the judging it needs;
- `audit`: heuristic flags of the user agent's failures, and Table 3 without the flagged dialogues;
- `figures`: the probe checks' figure.

Modules are imported by name (`from personalens_utils.trust import power`). `analysis` uses
`bootstrap` for its tables' intervals, and `bootstrap` uses `analysis.stats`; importing `analysis`
first, here, lets either side be imported first (the import graph itself has no cycle).
"""

import personalens_utils.analysis  # noqa: F401
