# LoginKit: `make demo` and `make test` set up everything they need on a fresh Debian machine
# that has the Swift toolchain. See README.md.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# System packages: the C libraries LoginKit links, and what its tests start.
BUILD_PACKAGES := libcurl4-openssl-dev libssl-dev pkg-config
# python3-venv: the venvs of moto (scripts/moto-venv.sh) and oidc-provider-mock (scripts/oidc-provider-venv.sh,
# which needs Python 3.12 or later: python3 where the distribution has it, else pyenv's).
# The keyring tests: a private D-Bus bus with GNOME Keyring (dbus, gnome-keyring, gdbus from
# libglib2.0-bin, libsecret-1-0 that LoginKit loads at run time), and seccomp for the container case.
TEST_PACKAGES := $(BUILD_PACKAGES) openssl tmux postgresql python3-venv dbus gnome-keyring libglib2.0-bin libsecret-1-0 python3-seccomp nginx-light git

SWIFT ?= swift
# The dev server, the fleet store, the lifecycle integration and the CLI sit behind package traits
# that are off by default, so that an app embedding the kit resolves none of their dependencies
# (docs/architecture.md, "Weight"). This repository's own builds turn every trait on; every build
# here uses the same flags, so that one build's products serve the next.
TRAITS ?= --enable-all-traits
export SWIFT_TRAITS = $(TRAITS)

.PHONY: help deps test-deps build release demo test bench bench-docs reliability docs api check-api snippets format lint clean

help:
	@echo "make demo         build and run the LoginKit demo against the embedded dev identity provider"
	@echo "make test         run every test (installs what the tests need)"
	@echo "make release      the CLI executables, optimised, Swift runtime linked in (.build-release/release)"
	@echo "make bench        benchmarks against the peers (results in .build/bench/)"
	@echo "make bench-docs   the same, then regenerate docs/benchmarks.md's table"
	@echo "make reliability  long crash, fault and fuzz runs"
	@echo "make docs         DocC reference of LoginKit, LoginKitViewModel, LoginKitMocks into .build/docs (warnings are errors)"
	@echo "make api          regenerate docs/api.md, the public API of every library product"
	@echo "make check-api    fail if the public API differs from docs/api.md (and, in signatures, from the commit in api-baseline)"
	@echo "make snippets     regenerate Tests/DocSnippetTests/Generated, the documentation's Swift blocks as compiled code"

deps:
	@scripts/install-deps.sh $(BUILD_PACKAGES)

test-deps:
	@scripts/install-deps.sh $(TEST_PACKAGES)

build: deps
	$(SWIFT) build $(TRAITS)

# The CLI as installed: optimised, with the Swift runtime and Foundation linked statically
# (--static-swift-stdlib: no dynamic symbol lookup for them at start-up; docs/benchmarks.md), and
# linked by lld with packed relocations, libstdc++ linked in and no exported symbols where the
# toolchain and the C library allow it (scripts/release-link-flags.sh; the executables then need glibc 2.36 or later
# where they run: `make release RELEASE_FLAGS=` links them as before). Its own scratch path, so
# that debug builds and tests keep theirs. Install the three together.
RELEASE_FLAGS = $(shell sh scripts/release-link-flags.sh $(SWIFT))
release: deps
	@# SwiftPM keeps a scratch path's build plan when only -Xswiftc flags change: drop it (the
	@# objects stay), so that a change of RELEASE_FLAGS reaches the link.
	rm -f .build-release/release.yaml .build-release/release/description.json
	$(SWIFT) build $(TRAITS) -c release --static-swift-stdlib $(RELEASE_FLAGS) --scratch-path .build-release --product loginkit
	$(SWIFT) build $(TRAITS) -c release --static-swift-stdlib $(RELEASE_FLAGS) --scratch-path .build-release --product loginkit-fleet
	$(SWIFT) build $(TRAITS) -c release --static-swift-stdlib $(RELEASE_FLAGS) --scratch-path .build-release --product loginkit-dev-server
	@echo "built: $$($(SWIFT) build $(TRAITS) -c release --scratch-path .build-release --show-bin-path)/{loginkit,loginkit-fleet,loginkit-dev-server}"

demo: deps
	$(SWIFT) build $(TRAITS) --product loginkit
	$(SWIFT) build $(TRAITS) --product loginkit-dev-server
	$$($(SWIFT) build $(TRAITS) --show-bin-path)/loginkit demo

test: test-deps
	scripts/check-closure.sh
	scripts/api-count.sh
	SWIFT=$(SWIFT) scripts/check-doc-snippets.sh
	$(SWIFT) build $(TRAITS) --build-tests
	# A hang must fail the run, not eat CI's 90 minutes: the suite takes about a minute. The output
	# is line-buffered (stdbuf), so that a run ended by the time limit shows every test that ended,
	# and a failed run lists the tests that started and never ended (scripts/unfinished-tests.py).
	set -o pipefail; LOGINKIT_REQUIRE_MOTO=1 LOGINKIT_REQUIRE_POSTGRES=1 LOGINKIT_REQUIRE_OIDC_PROVIDER=1 LOGINKIT_REQUIRE_KEYRING=1 timeout --kill-after=30 1200 \
		stdbuf -oL -eL scripts/with-postgres.sh scripts/with-moto.sh scripts/with-oidc-provider.sh $(SWIFT) test $(TRAITS) --skip-build 2>&1 \
		| tee .build/test-output.log || { python3 scripts/unfinished-tests.py .build/test-output.log; exit 1; }
	SWIFT=$(SWIFT) scripts/docs.sh
	# The public API still matches docs/api.md (names; the signature comparison with the baseline
	# commit in api-baseline builds that commit from scratch, so it runs in `make check-api` and CI,
	# not here).
	API_BASELINE=none SWIFT=$(SWIFT) scripts/check-api.sh

# postgresql: the fleet store's rows (Benchmarks/fleet.py), against a cluster of scripts/pg-cluster.sh.
# libsqlite3-dev: the storage layout's SQLite floor (Benchmarks/C/sqlite_commit.c).
BENCH_PACKAGES := $(BUILD_PACKAGES) nginx-light openssl curl postgresql libsqlite3-dev

bench:
	@scripts/install-deps.sh $(BENCH_PACKAGES)
	python3 Benchmarks/run.py

# The same run, then docs/benchmarks.md's table regenerated from it (a change to commit).
bench-docs:
	@scripts/install-deps.sh $(BENCH_PACKAGES)
	LOGINKIT_BENCH_UPDATE_DOCS=1 python3 Benchmarks/run.py

docs: deps
	SWIFT=$(SWIFT) scripts/docs.sh

api: deps
	SWIFT=$(SWIFT) scripts/api-surface.sh

check-api: deps
	SWIFT=$(SWIFT) scripts/check-api.sh

# Every ```swift block of README.md, docs/ and the DocC catalogs as a source of the DocSnippetTests
# target (scripts/doc-snippets.py): regenerate after editing a block, and commit the result; `make
# test` fails while the two differ.
snippets:
	python3 scripts/doc-snippets.py

reliability: test-deps
	$(SWIFT) build $(TRAITS) --build-tests
	scripts/reliability.sh

format:
	$(SWIFT) format --in-place --recursive Sources Tests Mocks Package.swift

lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Mocks Package.swift

clean:
	rm -rf .build
