# lawlab: `make run` runs the main job on the embedded default, `make test`
# runs the default test tier. Both first run `make install`, which only does
# what is still missing (every step below is a file target or a cheap check).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
TASKS_DIR ?= var/tasks
# the operator's secret that decides the Parallel worlds (created by `make tasks`)
WORLD_KEY ?= $(dir $(TASKS_DIR))world-key
PROTOS := $(shell find protos -name '*.proto')
GEN_STAMP := libs/lawlab/common/v1/common_pb2.py

.PHONY: install apt deps proto sandbox-access tasks node-client certs run test typecheck test-all baselines baselines-lsr lint clean distclean deploy deploy-dry-run undeploy docker base-image images push-images test-images test-load test-faults test-fuzz test-redteam test-bench test-keys test-attacks test-rerun test-release loadtest

install: apt deps proto sandbox-access tasks node-client

# System packages: installed only when a binary is missing.
apt:
	@missing=""; command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v setpriv >/dev/null && command -v prlimit >/dev/null || missing="$$missing util-linux"; \
	test -e /usr/lib/x86_64-linux-gnu/libseccomp.so.2 -o -e /usr/lib/aarch64-linux-gnu/libseccomp.so.2 \
	  || missing="$$missing libseccomp2"; \
	$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3-venv"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps-stamp: requirements.lock | $(PY)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	touch $@

# lawlab itself, editable; after the stubs, which are packages of its own
$(VENV)/.lawlab-stamp: pyproject.toml $(GEN_STAMP)
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

deps: $(VENV)/.lawlab-stamp

# Generated stubs land inside the lawlab package (lawlab.<service>.v1), so
# imports need no path tricks. They are not committed.
# order-only on the venv: a new lock (another test tool) does not regenerate the
# stubs, nor rebuild the task library after them (delete $(GEN_STAMP) to force it)
$(GEN_STAMP): $(PROTOS) | $(VENV)/.deps-stamp
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=libs --pyi_out=libs --grpc_python_out=libs $(PROTOS:protos/%=%)
	@# protoc writes under libs/lawlab/...; make each folder a regular package
	@for d in $$(cd protos && find lawlab -mindepth 1 -type d); do touch libs/$$d/__init__.py; done
	touch $@

proto: $(GEN_STAMP)

# Boxes run as unprivileged uids: they need search (o+x) on the directories
# above the interpreter. Adds only missing bits, and says which.
sandbox-access: deps
	@$(PY) -m lawlab_sandbox.access --fix

# Rebuilt when the builder or anything it evaluates with changes: its folder,
# sr's regression script (LSR-Synth's novelty check runs it) and every lawlab
# module it imports (tests/unit/test_baselines_state.py holds this list to
# bench/baselines.py's builder_sources).
TASK_SOURCES := $(shell find libs/lawlab_ops/taskbuild libs/lawlab/tasks/task_specs -name '*.py' -o -name '*.yaml' -o -name '*.json') \
  libs/lawlab_ops/__init__.py services/agent/lawlab_agent/builtin/sr/fit.py \
  $(addprefix libs/lawlab/,__init__.py fitting.py vocab.py \
    law/__init__.py law/contract.py law/expr.py law/predict.py \
    judging/__init__.py judging/antihack.py judging/rubric.py judging/structure.py judging/validity.py \
    worlds/__init__.py worlds/mechanisms.py worlds/neighbours.py worlds/world.py worlds/worldkey.py \
    tasks/__init__.py tasks/library.py tasks/specs.py judging/metrics.py)
$(TASKS_DIR)/.stamp: $(GEN_STAMP) $(TASK_SOURCES) | $(VENV)/.lawlab-stamp
	$(BIN)/lawlab tasks build --out $(TASKS_DIR)
	touch $@

tasks: $(TASKS_DIR)/.stamp

# The Node.js example client (tests prove the protos compile with another
# language's standard gRPC toolchain). Exact versions from package-lock.json.
clients/node/node_modules/.stamp: clients/node/package-lock.json
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-client: clients/node/node_modules/.stamp

# A self-signed TLS pair for local use (var/certs/server.pem, server.key).
CERTS_DIR ?= var/certs
certs:
	@scripts/make-certs.sh $(CERTS_DIR)

run: install
	$(BIN)/lawlab run --tasks $(TASKS_DIR)

# the default tier, a test file per worker at once (TEST_WORKERS=0: in this process)
TEST_WORKERS ?= 2
test: install
	$(BIN)/ruff check libs services tests bench
	$(TYPECHECK)
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

# Static types (mypy, settings in pyproject.toml): the core, then the five
# services (package lawlab_<name> in services/<name>/lawlab_<name>).
SERVICE_PATHS := libs:services/simulator:services/sandbox:services/agent:services/judge:services/scorer
define TYPECHECK
$(BIN)/mypy libs/lawlab libs/lawlab_ops
MYPYPATH=$(SERVICE_PATHS) $(BIN)/mypy -p lawlab_simulator -p lawlab_sandbox -p lawlab_agent -p lawlab_judge -p lawlab_scorer
endef

typecheck: install
	$(TYPECHECK)

test-all: install
	$(BIN)/pytest -q -m ''

# Gated tiers (not in `make test`, which runs a small version of each):
# load at the goals' levels, services SIGKILLed during a campaign, long fuzzing.
test-load: install
	$(BIN)/pytest -q -m load tests

test-faults: install
	$(BIN)/pytest -q -m faults tests

# every bench/ script in its smallest mode, as its docstring runs it (issue #20)
test-bench: install
	$(BIN)/pytest -q -m bench tests/bench

# The key sweep (issue #35): the library built with 5 fresh keys, each validated
# and the key-dependent tests (marker world_key) run against it; figures in bench/RESULTS.md
test-keys: install
	$(PY) bench/key_sweep.py --keys 5

# scoring under attack (issues #31, #50): the attacks that score real submissions end to
# end, the same S_N quiet and busy, and the experimenter against private variants
test-attacks: install
	$(BIN)/pytest -q -m attacks tests/integration/test_scoring_attacks.py \
	  tests/integration/test_scoring_budget.py tests/integration/test_experimenter_vs_private_variants.py

# baselines that re-run (issue #33): a sample of trials twice, the second beside a CPU hog;
# a time bound that shaped a trial (a <python> call the sandbox stopped) is noted on it
test-rerun: install
	$(BIN)/pytest -q -m rerun tests/integration/test_rerun.py

# one release on every machine (issue #56): the public release built twice, here and
# as a smaller CPU would, every file the same and the id the docs name (~15 min)
test-release: install
	$(BIN)/pytest -q -m release tests/integration/test_release_reproduces.py

test-fuzz: install
	LAWLAB_FUZZ_EXAMPLES=$${LAWLAB_FUZZ_EXAMPLES:-200} $(BIN)/pytest -q tests/integration/test_fuzz.py

# the public API's red-team tier (issue #16) at ten times its default-tier size
test-redteam: install
	REDTEAM_SCALE=$${REDTEAM_SCALE:-10} $(BIN)/pytest -q tests/integration/test_budget_bypass.py

# load figures (throughput, latency per RPC, errors, CPU/RSS per service, knees)
# -> paste into bench/RESULTS.md; SOAK=600 adds a 10-minute soak
loadtest: install
	$(PY) bench/loadtest.py $(if $(SOAK),--soak $(SOAK))

# the built-in agents: every real-data task, a seeded sample at more seeds, the rebuilt
# LLM-SRBench suites' samples, with intervals -> docs/baselines.md (about an hour)
baselines: install
	$(PY) bench/baselines.py

# the built-in agents on a larger seeded sample of the rebuilt LLM-SRBench suites than
# make baselines runs, three seeds, with intervals -> var/baselines-lsr/baselines-lsr.md
# (SAMPLE problems per suite; 8 take about half an hour on 2 cores)
baselines-lsr: install
	$(PY) bench/baselines_lsr.py --sample $(or $(SAMPLE),20)

# Container images, with no registry: a Docker engine (Debian's docker.io;
# started here if installed but not running), a Debian 12 base image made with
# debootstrap and `docker import`, then every service image on it, pinned by
# the base's id. Python wheels come from a host wheelhouse (build/wheels).
docker:
	@command -v dockerd >/dev/null || { echo "installing docker.io"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io; }
	@missing=""; command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	command -v docker-registry >/dev/null || missing="$$missing docker-registry"; \
	if [ -n "$$missing" ]; then echo "installing$$missing"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi
	@docker info >/dev/null 2>&1 || { echo "starting dockerd (log: var/dockerd.log; no bridge, no iptables)"; \
	  mkdir -p var; (setsid dockerd --bridge=none --iptables=false >var/dockerd.log 2>&1 &); \
	  for i in $$(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done; \
	  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see var/dockerd.log"; exit 1; }; }

base-image: docker
	deploy/docker/build-base.sh

images: install docker
	PY=$(PY) deploy/docker/build-images.sh

# Push the images to REGISTRY and pin an overlay (default prod) to their digests.
OVERLAY ?= prod
push-images:
	@test -n "$(REGISTRY)" || { echo "usage: make push-images REGISTRY=host[:port][/path] [OVERLAY=prod|local]"; exit 1; }
	$(PY) deploy/docker/push-images.py $(REGISTRY) --overlay deploy/k8s/overlays/$(OVERLAY)

# The gated image end-to-end tier: trials through the five containers, the
# sandbox's Docker backend, and the red-team suite against that backend.
test-images: images
	LAWLAB_E2E_REQUIRED=1 $(BIN)/pytest -q -m e2e tests/e2e tests/integration/test_redteam.py

# Kubernetes: ENV=local (a dev cluster) or ENV=prod. No cluster runs on the
# build machine: deploy-dry-run renders every overlay and component and runs the
# schema and policy checks; deploy applies to the current kubectl context.
ENV ?= local
RENDER_DIR ?= var
deploy-dry-run: install
	@test -d deploy/k8s/overlays/$(ENV) || { echo "ENV=$(ENV): no such overlay; choose one of: $$(ls deploy/k8s/overlays | tr '\n' ' ')(make deploy-dry-run ENV=prod)"; exit 2; }
	@mkdir -p $(RENDER_DIR)
	kubectl kustomize deploy/k8s/overlays/$(ENV) > $(RENDER_DIR)/deploy-$(ENV).yaml.tmp && mv $(RENDER_DIR)/deploy-$(ENV).yaml.tmp $(RENDER_DIR)/deploy-$(ENV).yaml || { rm -f $(RENDER_DIR)/deploy-$(ENV).yaml.tmp; exit 1; }
	$(BIN)/pytest -q tests/integration/test_deploy.py
	@echo "rendered overlay $(ENV): $(RENDER_DIR)/deploy-$(ENV).yaml"
	@$(BIN)/python deploy/summary.py $(RENDER_DIR)/deploy-$(ENV).yaml $(ENV)

deploy: deploy-dry-run
	@ctx=$$(kubectl config current-context 2>/dev/null) || { echo "no current kubectl context: point kubectl at your cluster (kubectl config use-context NAME)"; exit 1; }; \
	echo "applying overlay $(ENV) to kubectl context '$$ctx'"; \
	kubectl cluster-info --request-timeout=10s >/dev/null || { echo "the cluster of context '$$ctx' is not reachable"; exit 1; }; \
	if [ -f "$(WORLD_KEY)" ]; then \
	  echo "storing the world key $(WORLD_KEY) (fingerprint $$($(BIN)/lawlab tasks fingerprint --key $(WORLD_KEY))) as Secret lawlab-world-key"; \
	  kubectl create namespace lawlab --dry-run=client -o yaml | kubectl apply -f - >/dev/null; \
	  kubectl -n lawlab create secret generic lawlab-world-key --from-file=world-key=$(WORLD_KEY) \
	    --dry-run=client -o yaml | kubectl apply -f - >/dev/null; \
	else echo "no world key at $(WORLD_KEY): create Secret lawlab-world-key from the key that built the library"; fi; \
	kubectl apply --server-side -k deploy/k8s/overlays/$(ENV)

undeploy:
	kubectl delete -k deploy/k8s/overlays/$(ENV) --ignore-not-found

lint: install
	$(BIN)/ruff check libs services tests bench

clean:
	rm -rf var/run build .pytest_cache

distclean: clean
	rm -rf $(VENV) var $(GEN_STAMP)
