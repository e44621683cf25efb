# Set-up is part of every target: the virtual environment is created when missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed
# the optimum-executorch integration's environment: the extra xir[optimum] pins transformers==5.0.0rc1,
# which the main environment's transformers conflicts with; tests_optimum/ runs there
VENV_OPTIMUM := .venv-optimum
STAMP_OPTIMUM := $(VENV_OPTIMUM)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

$(STAMP_OPTIMUM): pyproject.toml
	test -x $(VENV_OPTIMUM)/bin/python || $(PYTHON) -m venv $(VENV_OPTIMUM)
	$(VENV_OPTIMUM)/bin/pip install --quiet --upgrade pip
	$(VENV_OPTIMUM)/bin/pip install --quiet -e '.[optimum]' pytest pytest-xdist
	touch $(STAMP_OPTIMUM)

demo: $(STAMP)
	$(VENV)/bin/xir demo

# --max-worker-restart 0: a worker that crashes (a segmentation fault in the runtime) fails the run at
# once with the test's name, instead of xdist re-running the rest of its file on new workers.
# Then the optimum-executorch integration's tests in their own environment (tests_optimum/).
test: $(STAMP) $(STAMP_OPTIMUM)
	$(VENV)/bin/python -m pytest -q -rs -n 2 --dist loadfile --max-worker-restart 0
	$(VENV_OPTIMUM)/bin/python -m pytest -q -n 2 --dist loadfile --max-worker-restart 0 tests_optimum

bench: $(STAMP)
	$(VENV)/bin/pip install --quiet -e '.[test,bench]'
	$(VENV)/bin/python -m bench --quick

clean:
	rm -rf $(VENV) $(VENV_OPTIMUM) xir-demo
