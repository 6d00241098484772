# The two commands a newcomer needs:
#   make demo   - set up and run the main job on the embedded defaults
#   make test   - set up and run the whole test suite (what CI runs)
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip >/dev/null
	$(BIN)/python -m pip install -e '.[dev,test,spark,dagster,helm,embedded]'
	@# examples/ is not in the wheel: the checkout's root on this venv's path keeps the demo
	@# app and the orders plugin (examples.orders_app) importable from any directory.
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "platform-streams-checkout.pth").write_text(str(pathlib.Path.cwd()) + "\n")'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/python -m examples.demo

# pytest exits 5 when it collected no test (e.g. a -k filter matched nothing): say so and
# do not fail the build for it; any other non-zero status fails. PYTEST_ARGS narrows a run.
test: setup
	@$(BIN)/python -m pytest -q -ra $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests"; exit 0; fi; exit $$status

lint: setup
	$(BIN)/ruff check platform_streams tests bench examples
	$(BIN)/mypy

bench: setup
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
