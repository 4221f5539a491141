"""Test infrastructure shared by tests/ and benchmarks/, kept out of the installed package.

`fake_server` (a loopback fake of the Anthropic, OpenAI and Bedrock HTTP APIs), `fake_batches`
(its Message Batches endpoints), `loopback_model` (a bare-socket client for timing),
`official_data` (the official archive beside the checkout, for benchmark scripts and fixtures),
`checkout` (a fresh copy of the kit and a small `make reproduce` in it).
Tests import it as `support` (pyproject sets pytest's pythonpath to tests/); benchmark scripts put
tests/ on sys.path first.
"""
