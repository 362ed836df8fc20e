# jupyterlab-gpu-hygiene — two commands on a fresh machine:
#   make lab    set everything up and open JupyterLab on the demo notebook
#   make test   set everything up and run every test (lint, jest, pytest, Galata)
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := .make
# The wheel that make build installs into .venv (and make test-floor into the floor's venv).
DIST := $(STAMP)/dist
CHROMIUM := /usr/bin/chromium
export YOLO_OFFLINE := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

TS_SOURCES := $(shell find src style schema -type f -not -path 'src/_generated/*' 2>/dev/null) package.json tsconfig.json floor/core.package.json
# The Python package around the labextension (the server extension) and the config that enables it.
PY_SOURCES := $(filter-out jupyterlab_gpu_hygiene/_version.py,$(wildcard jupyterlab_gpu_hygiene/*.py)) \
	$(wildcard jupyter-config/server-config/*.json) \
	$(wildcard jupyterlab_gpu_hygiene/locale/*/LC_MESSAGES/*.json)

.PHONY: lab test setup build lint test-unit test-agent test-ui test-gateway test-notebook7 test-floor test-fleet clean help i18n

help:
	@echo "make lab    # set up .venv and node_modules, build, open JupyterLab on a scratch copy of examples/stacked-yolo.ipynb"
	@echo "make test   # set up, then lint + jest + pytest (real kernel) + Galata (Debian chromium)"

$(STAMP):
	mkdir -p $(STAMP)

# Python environment: JupyterLab, ipykernel, torch (from the local wheel folder here), ultralytics.
# pip compiles every module as it installs (~50 s of one core): the machines set
# PYTHONDONTWRITEBYTECODE=1, so a module pip did not compile is compiled again by every process
# that imports it (with --no-compile, test-agent took 594 s instead of ~270 s on a fresh clone).
$(STAMP)/venv: requirements-dev.txt | $(STAMP)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	touch $@

# Node dependencies, exactly as locked.
$(STAMP)/node: package.json package-lock.json | $(STAMP)
	npm ci --no-audit --no-fund
	touch $@

# The prebuilt labextension and the server extension, installed into .venv the way users get them
# (a wheel install): the wheel's etc/jupyter/jupyter_server_config.d/jupyterlab_gpu_hygiene.json
# enables the server extension, so no `jupyter server extension enable` is needed.
$(STAMP)/build: $(STAMP)/venv $(STAMP)/node $(TS_SOURCES) $(PY_SOURCES) pyproject.toml install.json
	source $(BIN)/activate
	npm run build:prod
	rm -rf $(DIST)
	pip wheel -q --no-build-isolation --no-deps -w $(DIST) .
	pip install -q --no-deps --force-reinstall $(DIST)/jupyterlab_gpu_hygiene-*.whl
	jupyter labextension list 2>&1 | grep -E "jupyterlab-gpu-hygiene .*enabled.*OK"
	jupyter server extension list 2>&1 | grep -E "jupyterlab_gpu_hygiene .*enabled"
	jupyter server extension list 2>&1 | grep -E "jupyterlab_gpu_hygiene .*OK"
	touch $@

$(STAMP)/chromium: | $(STAMP)
	if [ ! -x $(CHROMIUM) ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi
	touch $@

setup: $(STAMP)/build

build: $(STAMP)/build

# The demo runs from a scratch copy in $(STAMP)/lab (ignored by git), so its outputs and autosaves
# never touch the tracked examples/stacked-yolo.ipynb; the copy is made again only when the example
# changes. The URL printed is the notebook's own (LabApp.default_url), not the Launcher's. The copy
# carries the language_info of .venv's ipykernel, so it does not open as modified when the kernel
# connects (scripts/demo_notebook.py).
$(STAMP)/lab/stacked-yolo.ipynb: examples/stacked-yolo.ipynb scripts/demo_notebook.py $(STAMP)/venv
	$(BIN)/python scripts/demo_notebook.py examples/stacked-yolo.ipynb $@

lab: $(STAMP)/build $(STAMP)/lab/stacked-yolo.ipynb
	source $(BIN)/activate
	# --allow-root only where make runs as root (containers, CI machines).
	cd $(STAMP)/lab && jupyter lab --ip=127.0.0.1 --LabApp.default_url=/lab/tree/stacked-yolo.ipynb \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root)

lint: $(STAMP)/venv $(STAMP)/node
	npm run build:agent
	npm run lint:check
	# the types of src/ and test/unit/ (jest only transpiles them: tsconfig.jest.json)
	npx tsc -p tsconfig.test.json
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-unit: $(STAMP)/node $(STAMP)/venv
	npm test

# The real-kernel tests run in PYTEST_WORKERS processes (pytest-xdist; each test starts its own
# kernel, so they are independent); worksteal hands a finished worker the next test of a slow one's
# share (the two 60-second busy cells of test_busy_cell.py end on different workers).
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := $(if $(filter-out 0 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist worksteal)

test-agent: $(STAMP)/venv $(STAMP)/node
	npm run build:agent
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_PARALLEL)

# The versions the agent meets (issue 16, kernel side): the real-kernel agent suite (test/agent)
# with the kernel in a virtualenv of other IPython / ipykernel / torch / Ultralytics /
# transformers versions, pytest itself in .venv (scripts/compat.py: one cached venv per
# combination under $(STAMP)/compat, torch 2.14.1 shared from .venv, not copied).
#   make compat                every combination in turn (about 45 min); writes docs/compat.json,
#                              docs/compat.md and README.md's kernel-side table
#   make test-compat-oldest    the oldest combination only (CI; the newest is test-agent):
#                              COMPAT_SUBSET=1 (default) runs the tests marked compat (about 5 min
#                              after a 1 min setup), COMPAT_SUBSET= the whole suite (about 10 min)
#   COMPAT_ARGS=...            more options of scripts/compat.py (--help), e.g. NAMES for compat
COMPAT_SUBSET ?= 1
COMPAT_ARGS ?=
.PHONY: compat test-compat-oldest
compat: $(STAMP)/venv $(STAMP)/node
	npm run build:agent
	$(BIN)/python scripts/compat.py all $(COMPAT_ARGS)

test-compat-oldest: $(STAMP)/venv $(STAMP)/node
	npm run build:agent
	$(BIN)/python scripts/compat.py run oldest $(if $(COMPAT_SUBSET),--subset \
		$(if $(PYTEST_PARALLEL),--pytest-args "$(PYTEST_PARALLEL)")) $(COMPAT_ARGS)

# The oldest kernel's venv alone (scripts/compat.py setup: cached under $(STAMP)/compat).
.PHONY: compat-setup-oldest
compat-setup-oldest: $(STAMP)/venv
	$(BIN)/python scripts/compat.py setup oldest

# Galata: the specs that may share the machine in GPU_HYGIENE_UI_WORKERS browsers (default 1),
# then those that must run alone (playwright.config.js, project "alone"); both run, the stage
# fails if either failed.
test-ui: $(STAMP)/build $(STAMP)/chromium
	source $(BIN)/activate
	rc=0
	npx playwright test --project=parallel || rc=$$?
	npx playwright test --project=alone --output=test-results/alone || rc=$$?
	exit $$rc

# The browser test again with every kernel remote, behind a Jupyter Kernel Gateway.
test-gateway: $(STAMP)/build $(STAMP)/chromium
	source $(BIN)/activate
	npx playwright test -c playwright.gateway.config.js

# The extension in Jupyter Notebook 7 (no status bar: the gauge sits in its menu bar).
test-notebook7: $(STAMP)/build $(STAMP)/chromium
	source $(BIN)/activate
	npx playwright test -c playwright.notebook7.config.js

# The oldest page side the extension supports, beside the newest (floor/README.md): JupyterLab
# 4.0.2 and Notebook 7.0.0 (floor/requirements.txt) in a venv of their own, with the wheel of
# make build, and their kernels from .venv. The labextension is built against that JupyterLab's
# core metadata (floor/core.package.json: the shared packages' required versions) and src/ is
# type-checked against its packages (floor/package.json); pip must refuse a JupyterLab below it
# (test/floor/test_floor.py, with JupyterLab 4.0.1's wheel, fetched once into $(FLOOR_BELOW));
# the browser smoke test runs in both pages and in .venv's JupyterLab and Notebook 7
# (playwright.floor.config.js).
FLOOR_VENV := $(STAMP)/floor-venv
FLOOR_BELOW := $(STAMP)/floor-below
$(STAMP)/floor: floor/requirements.txt $(STAMP)/build
	test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install -q -r floor/requirements.txt
	$(FLOOR_VENV)/bin/python -m pip install -q --no-index --no-deps --force-reinstall $(DIST)/jupyterlab_gpu_hygiene-*.whl
	$(FLOOR_VENV)/bin/jupyter labextension list 2>&1 | grep -E "jupyterlab-gpu-hygiene .*enabled.*OK"
	$(FLOOR_VENV)/bin/jupyter server extension list 2>&1 | grep -E "jupyterlab_gpu_hygiene .*OK"
	$(FLOOR_VENV)/bin/python -m pip download -q --no-deps -d $(FLOOR_BELOW) jupyterlab==4.0.1
	touch $@

$(STAMP)/floor-types: floor/package.json floor/package-lock.json | $(STAMP)
	npm ci --prefix floor --no-audit --no-fund --ignore-scripts
	touch $@

test-floor: $(STAMP)/floor $(STAMP)/floor-types $(STAMP)/chromium
	source $(BIN)/activate
	npx tsc -p floor/tsconfig.json
	FLOOR_VENV=$(FLOOR_VENV) FLOOR_DIST=$(DIST) FLOOR_BELOW=$(FLOOR_BELOW) \
		python -m pytest -q -p no:cacheprovider test/floor
	npx playwright test -c playwright.floor.config.js

# The standard idle cullers and Prometheus against servers that run the extension (issue 40,
# test/fleet/, no mock): jupyter_server's kernel culler (cull_idle_timeout, with cull_connected
# too); a JupyterHub (the jupyterhub package, configurable-http-proxy, SimpleLocalProcessSpawner
# running .venv's jupyterhub-singleuser, three users) with jupyterhub-idle-culler as a hub
# service; Debian's prometheus scraping gpu-hygiene/metrics through the hub's proxy. The tests
# start and stop every server themselves, on 127.0.0.1 at free ports. Installs: jupyterhub and
# the culler into .venv (test/fleet/requirements.txt), configurable-http-proxy as locked in
# test/fleet/proxy/ into $(FLEET_PROXY), prometheus with apt where $(PROMETHEUS) is missing. The
# two test files run side by side (pytest-xdist, a worker per file: the hub's six tests share one
# scenario, the culler's two cases run in turn): about 80 s on a 2-core machine.
FLEET_PROXY := $(STAMP)/chp
PROMETHEUS := /usr/bin/prometheus
$(STAMP)/fleet-hub: test/fleet/requirements.txt $(STAMP)/venv
	$(BIN)/python -m pip install -q -r test/fleet/requirements.txt
	touch $@

$(STAMP)/fleet-proxy: test/fleet/proxy/package.json test/fleet/proxy/package-lock.json | $(STAMP)
	rm -rf $(FLEET_PROXY)
	mkdir -p $(FLEET_PROXY)
	cp test/fleet/proxy/package.json test/fleet/proxy/package-lock.json $(FLEET_PROXY)/
	npm ci --prefix $(FLEET_PROXY) --no-audit --no-fund
	$(FLEET_PROXY)/node_modules/.bin/configurable-http-proxy --version
	touch $@

$(STAMP)/prometheus: | $(STAMP)
	if [ ! -x $(PROMETHEUS) ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; fi
	$(PROMETHEUS) --version 2>&1 | head -1
	touch $@

test-fleet: $(STAMP)/build $(STAMP)/fleet-hub $(STAMP)/fleet-proxy $(STAMP)/prometheus
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile test/fleet

# make test: set-up, then the stages, every one timed; the table of times is printed at the end,
# also when a stage fails (and kept in $(STAMP)/test-times.txt). The two venvs that only later
# stages need (the oldest kernel's, the floor's: mostly downloads and unpacking), the fleet's proxy
# and prometheus are made in the background while lint, jest and the agent tests run. Then the
# Galata stage (test-ui) runs beside a chain of the others (TEST_BESIDE_UI, in turn): measured on
# a 2-core machine (sampling /proc/stat every 5 s), test-ui kept the cores 55 % busy on average
# (532 s), the others 60-76 % (their servers use other ports: 8889, 8890-8893). The Kernel
# Gateway stage comes after them: beside Galata its first websocket stalled (a ping timeout after
# 90 s). The fleet stage too: its cullers' bounds are timed to a few seconds, which Galata's load
# on two cores would eat.
TEST_STAGES := lint+test-unit test-agent
TEST_BESIDE_UI := test-compat-oldest test-notebook7 test-floor
TEST_AFTER_UI := test-gateway test-fleet
# lint (one core: eslint, prettier, tsc, ruff) and jest (one worker on two cores) side by side;
# each one's output is printed whole when it ends
.PHONY: lint+test-unit
lint+test-unit:
	$(MAKE) --no-print-directory -j2 --output-sync=target lint test-unit
test:
	mkdir -p $(STAMP)
	times=$(STAMP)/test-times.txt
	: > $$times
	t_all=$$(date +%s)
	report() {
		rc=$$?
		printf '\n%-22s %8s\n' "make test stage" "seconds" | tee $$times.tmp
		cat $$times | tee -a $$times.tmp
		printf '%-22s %8s\n' "total" "$$(( $$(date +%s) - t_all ))" | tee -a $$times.tmp
		mv $$times.tmp $$times
		# a stage failed before the background set-up was waited for: let it end (no orphans)
		[ -z "$${bg:-}" ] || wait $$bg 2>/dev/null || true
		exit $$rc
	}
	trap report EXIT
	stage() {
		local name=$$1 t0=$$(date +%s); shift
		"$$@" || { printf '%-22s %8s  FAILED\n' "$$name" "$$(( $$(date +%s) - t0 ))" >> $$times; return 1; }
		printf '%-22s %8s\n' "$$name" "$$(( $$(date +%s) - t0 ))" >> $$times
	}
	# .venv (pip) and node_modules (npm ci) are made side by side, then the build
	stage setup $(MAKE) --no-print-directory -j2 $(STAMP)/build $(STAMP)/chromium
	( $(MAKE) --no-print-directory compat-setup-oldest $(STAMP)/floor $(STAMP)/floor-types \
		$(STAMP)/fleet-proxy $(STAMP)/prometheus > $(STAMP)/test-background.log 2>&1 ) &
	bg=$$!
	for s in $(TEST_STAGES); do
		stage $$s $(MAKE) --no-print-directory $$s
	done
	if ! wait $$bg; then bg=; cat $(STAMP)/test-background.log; exit 1; fi
	bg=
	printf '%-22s %8s\n' "(background set-up)" "done" >> $$times
	# the chain beside Galata; its output is kept apart and printed whole when it ends
	( for s in $(TEST_BESIDE_UI); do stage $$s $(MAKE) --no-print-directory $$s || exit 1; done \
		> $(STAMP)/test-beside-ui.log 2>&1 ) &
	bg=$$!
	rc=0
	stage test-ui $(MAKE) --no-print-directory test-ui || rc=$$?
	wait $$bg || rc=$$?
	bg=
	cat $(STAMP)/test-beside-ui.log
	[ $$rc = 0 ] || exit $$rc
	for s in $(TEST_AFTER_UI); do
		stage $$s $(MAKE) --no-print-directory $$s
	done

# Translations (zh_CN), with JupyterLab's own tool chain, jupyterlab-translate (PyPI; installed into
# .make/i18n-tools, not into .venv, for this target only): extract every trans.__/_n/_p string of
# src/ and every title/description of schema/ into locale/jupyterlab_gpu_hygiene.pot, merge it into
# the catalogue jupyterlab_gpu_hygiene/locale/zh_CN/LC_MESSAGES/jupyterlab_gpu_hygiene.po (kept:
# new strings come in empty, changed ones marked fuzzy), then compile the .po to the .json that
# jupyterlab_server serves (committed beside it; the .mo it also writes is not used and not kept).
# The tool walks every top-level folder of the tree it is given, so it runs on a copy of src/,
# schema/ and package.json. Translate the new empty and fuzzy entries of the .po, then run it again;
# test/unit/i18n.spec.ts fails on a string without a zh_CN entry.
I18N_TOOLS := $(STAMP)/i18n-tools
I18N_LOCALE := jupyterlab_gpu_hygiene/locale
I18N_LANGS := zh_CN
$(I18N_TOOLS): | $(STAMP)
	$(BIN)/python -m pip install -q --target $(I18N_TOOLS) jupyterlab-translate==1.3.7

i18n: $(I18N_TOOLS)
	stage=$$(mktemp -d)
	trap 'rm -rf "$$stage"' EXIT
	mkdir -p "$$stage/jupyterlab_gpu_hygiene"
	cp -r src schema package.json "$$stage/"
	rm -rf "$$stage/src/_generated" "$$stage/src/agent"
	# The catalogue's version (Project-Id-Version) comes from a package.json in the package folder.
	cp package.json "$$stage/jupyterlab_gpu_hygiene/"
	[ ! -d $(I18N_LOCALE) ] || cp -r $(I18N_LOCALE) "$$stage/jupyterlab_gpu_hygiene/"
	# The template is extracted anew (the tool merges into an existing one: removed strings stayed).
	rm -f "$$stage/$(I18N_LOCALE)/jupyterlab_gpu_hygiene.pot"
	export PYTHONPATH=$(abspath $(I18N_TOOLS)) PATH=$(abspath $(I18N_TOOLS))/bin:$(abspath $(BIN)):$$PATH
	for lang in $(I18N_LANGS); do
		jupyterlab-translate update "$$stage" jupyterlab_gpu_hygiene -l $$lang
		# Babel writes zh_CN as zh_Hans_CN; JupyterLab's translator looks the bundle up under the
		# language of the .json header (zh-CN), so the header keeps the locale as given.
		sed -i -E "s/^\"Language: [^\\]*\\\\n\"$$/\"Language: $$lang\\\\n\"/" \
			"$$stage/$(I18N_LOCALE)/$$lang/LC_MESSAGES/jupyterlab_gpu_hygiene.po"
		po="$$stage/$(I18N_LOCALE)/$$lang/LC_MESSAGES/jupyterlab_gpu_hygiene.po"
		mkdir -p $(I18N_LOCALE)/$$lang/LC_MESSAGES
		cp "$$po" $(I18N_LOCALE)/$$lang/LC_MESSAGES/
		# A fuzzy entry is Babel's guess from a similar old string: kept in the .po for the
		# translator, never served (the tool's compile would put it in the .json).
		msgattrib --clear-fuzzy --empty -o "$$po" "$$po"
		# compile merges into an existing .json: start from none, so removed strings go.
		rm -f "$${po%.po}.json"
		jupyterlab-translate compile "$$stage" jupyterlab_gpu_hygiene -l $$lang
		cp "$${po%.po}.json" $(I18N_LOCALE)/$$lang/LC_MESSAGES/
	done
	cp "$$stage/$(I18N_LOCALE)/jupyterlab_gpu_hygiene.pot" $(I18N_LOCALE)/
	npx prettier --write $(I18N_LOCALE)/*/LC_MESSAGES/*.json >/dev/null

clean:
	rm -rf $(STAMP) floor/node_modules lib jupyterlab_gpu_hygiene/labextension src/_generated tsconfig.tsbuildinfo test-results playwright-report

# GPU truth check on a machine with an NVIDIA GPU (offline): the pytest tests marked gpu (the
# cases of test/agent/test_cases.py on cuda:0, test/agent/test_gpu_truth.py), real kernels, the
# agent as the browser sends it, its figures against NVML / nvidia-smi / torch; the harness
# scripts/gpu_check.py writes their rows to docs/gpu-check.md.
#   make gpu-check [WHEELS=dir]   wheels for what the machine lacks (ipykernel, ultralytics...);
#                                 REPORT=path instead of docs/gpu-check.md
#   NODE=path CLEANUP_JS=path     node and a compiled src/analysis/codegen/clean-cell.js where the project's
#                                 tsc is missing; CLEAN_CELLS=dir for pre-generated clean cells;
#   GPU_CHECK_ARGS=...            more options of scripts/gpu_check.py (--help); without a GPU,
#                                 GPU_CHECK_ARGS="--device cpu --report /tmp/r.md" tries the
#                                 plumbing on the cases' [cpu] variants
#   make gpu-check-js             where tsc is: the browser's modules (cell generators, issue 12's
#                                 views) and the node packages they load in .make/gpu-check/js,
#                                 for CLEANUP_JS=.make/gpu-check/js/analysis/codegen/clean-cell.js there
.PHONY: gpu-check gpu-check-js
gpu-check:
	py=$$([ -x $(BIN)/python ] && echo $(BIN)/python || command -v python3)
	$$py scripts/gpu_check.py $(if $(REPORT),--report $(REPORT)) \
		$(if $(WHEELS),--wheels $(WHEELS)) $(if $(NODE),--node $(NODE)) \
		$(if $(CLEANUP_JS),--cleanup-js $(CLEANUP_JS)) $(if $(CLEAN_CELLS),--clean-cells $(CLEAN_CELLS)) \
		$(GPU_CHECK_ARGS)

gpu-check-js:
	$(BIN)/python scripts/gpu_check.py --compile-js $(STAMP)/gpu-check/js

# Cost of the kernel agent (issue 3): real kernels with 1e4..2e6 live objects and 1/10/50 YOLO
# models, the agent's per-cell and per-sample cost against a naive gc scan and ipyexperiments'
# per-cell logger; writes bench/results.json (the full matrix only: agent version, commit, machine,
# rows; a narrowed run writes bench/results.partial.json) and bench/profile.txt (docs/benchmarks.md
# explains; test/bench/test_results.py fails when results.json is of another agent version).
# Then what a JupyterLab start costs (issue 14): kernel ready -> the agent's hello in 20 fresh
# kernels (bench/hello.py), and, in Debian chromium against a server of its own serving this
# build, the bytes of this extension's start path and hello in the page (bench/start.mjs: its
# byte budget fails the target; timings are printed against their goal).
#   make bench [BENCH_ARGS=--quick]   BENCH_ARGS: more options of bench/bench.py (--help)
#   HELLO_ARGS=..., START_ARGS=...    options of bench/hello.py, bench/start.mjs (--help)
#   BASELINE=dir                      another build's labextension folder, measured beside
.PHONY: bench bench-start bench-quiet
$(STAMP)/bench: bench/requirements.txt $(STAMP)/venv | $(STAMP)
	$(BIN)/python -m pip install -q --no-deps -r bench/requirements.txt
	$(BIN)/python -c "import ipyexperiments, psutil; print('ipyexperiments', ipyexperiments.__version__)"
	touch $@

bench: $(STAMP)/bench
	$(BIN)/python bench/bench.py $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-start

# What an idle kernel sends on IOPub (issue 40): messages and bytes per hour of kernels with and
# without the agent, a page open or not, DataLoader-like workers coming and going, and the
# previous agent as baseline, in one window (default 600 s) of a real server and chromium; writes
# bench/quiet.json.   make bench-quiet [QUIET_ARGS="--window 600"]
bench-quiet: $(STAMP)/build $(STAMP)/chromium
	$(BIN)/python bench/quiet.py $(QUIET_ARGS)

bench-start: $(STAMP)/build $(STAMP)/chromium
	$(BIN)/python bench/hello.py --json bench/hello.json $(HELLO_ARGS)
	node bench/start.mjs --python $(BIN)/python --json bench/start.json \
		$(if $(BASELINE),--baseline $(BASELINE)) $(START_ARGS)
