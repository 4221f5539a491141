"""How far to trust a number: uncertainty that respects how a PersonaLens run is built.

A run nests its judgments: users, tasks of each user, simulation repeats of each scenario, judge
samples of each dialogue. Judgments of one user are not independent, so intervals and plans count
users, not dialogues, as the unit that varies.

- `differences`: every pair of assistant models compared on their shared scenarios (a table);
- `variance`: the share of each metric's variance due to users, tasks, simulation and judging;
- `power`: the smallest difference a design detects, the users it needs, and what it costs;
- `report_card`, `probes`: the judge report card, its checks and the re-judging probes they need
  (another user's profile, padded assistant turns), stored apart from ordinary judgments;
- `probe_design`: the small design notebook 07 probes, and the judging it needs;
- `audit`: heuristic flags of the user agent's failures, and Table 3 without the flagged dialogues;
- `figures`: the probe checks' figure.

The frame every module reads (`measures.design`: one row per judgment with `user`, `task`, `sample`,
`judge_sample`, `assistant`, `score`) and the cluster-bootstrap intervals (`measures.bootstrap`) sit
in `analysis`, beside the statistics they build on, because Tables 3, 4 and 12 print them too.
Modules are imported by name (`from personalens_utils.trust import power`).
"""
