# Set-up is part of every target: the virtual environment is created when missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/xir demo

# --max-worker-restart 0: a worker that crashes (a segmentation fault in the runtime) fails the run at
# once with the test's name, instead of xdist re-running the rest of its file on new workers.
test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -rs -n 2 --dist loadfile --max-worker-restart 0

bench: $(STAMP)
	$(VENV)/bin/pip install --quiet -e '.[test,bench]'
	$(VENV)/bin/python -m bench --quick

clean:
	rm -rf $(VENV) xir-demo
