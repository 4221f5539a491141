"""Test infrastructure shared by tests/ and benchmarks/, kept out of the installed package.

Everything one test file shares with another lives here: no test file imports another
(tests/test_test_layout.py checks it). Servers: `fake_server` (a loopback fake of the Anthropic, OpenAI
and Bedrock HTTP APIs), `fake_batches` (its Message Batches endpoints), `fake_bedrock`, `fault_server`,
`loopback_model` (a bare-socket client for timing). Data and stores: `tiny_benchmark`,
`hand_made_benchmark`, `synthetic_store`, `explorer_store`, `records`, `trust_design`, `official_data`,
`official_code`, `persona_bench`, `legacy_analysis`, `read_only`.
Scripted models: `scripted_models`, `scripted_judge`, `planted_judges`, `assistants`. Outputs: `pdf`,
`latex_page`, `figures`, `paper_outputs`, `notebook_output`. Source: `source_trees` (each file parsed once
per process). Processes: `checkout` (a fresh copy of the kit and a small `make reproduce` in it),
`slow_simulation`, `lab`. Fixtures used by test files of several folders: `shared_fixtures`, registered as a
pytest plugin by tests/conftest.py. Tests import it as `support` (pyproject sets pytest's pythonpath to
tests/); benchmark scripts put tests/ on sys.path first.
"""
