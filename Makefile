# trainctl -- top-level Makefile.  CMake does the build; this file holds the
# two set-up commands of the README (demo, check) and the usual targets.

PREFIX ?= /usr/local
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
CLANG ?= clang
# make fuzz: seconds per target; make fuzz-check (part of make check): seconds
# of new inputs per target after its corpus (docs/fuzzing.md)
FUZZ_SECONDS ?= 300
FUZZ_CHECK_SECONDS ?= 20
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PYTHON ?= /usr/bin/python3
# where `make install` puts the Python package (python/): a folder the system
# python searches (Debian: /usr/lib/python3/dist-packages for /usr, else
# PREFIX/lib/pythonX.Y/dist-packages)
PYTHON_SITE ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages)

.PHONY: all build asan deps demo check unit unit-asan e2e soak install install-python clean bench \
	fuzz-build fuzz fuzz-check check-paths check-arch

all: build

# the web UI embeds uPlot from web/node_modules (npm); the UI test drives
# chromium with playwright-core from tests/ui/node_modules
web/node_modules/uplot:
	npm ci --prefix web --no-audit --no-fund

tests/ui/node_modules/playwright-core:
	npm ci --prefix tests/ui --no-audit --no-fund

build: web/node_modules/uplot
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

asan: web/node_modules/uplot
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTC_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Debian packages the build, the tests and the demo need.
deps:
	scripts/install-deps.sh

demo: deps build
	scripts/demo.sh

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

unit-asan: asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

# End-to-end tests run against the sanitizer build, so that a memory error
# anywhere in a real run fails the suite.
e2e: asan tests/ui/node_modules/playwright-core
	TRAINCTL=$(CURDIR)/$(ASAN_BUILD)/trainctl $(PYTHON) -m pytest -q tests/e2e

# The e2e suite twice while stress-ng keeps 2 CPUs busy, as on a loaded CI
# machine (scripts/soak.sh; SOAK_ROUNDS, SOAK_CPUS), after the I/O fault sweep
# over every N and 200 crash-loop rounds (docs/reliability.md).  Not part of check.
# First the fresh-machine check, building its root when it is not cached
# (scripts/fresh-machine-check.sh; make check runs it only with a warm cache).
soak: asan tests/ui/node_modules/playwright-core
	scripts/fresh-machine-check.sh
	TRAINCTL=$(CURDIR)/$(ASAN_BUILD)/trainctl PYTHON=$(PYTHON) scripts/soak.sh

check: deps
	$(MAKE) check-web
	$(MAKE) build
	$(MAKE) unit
	$(MAKE) unit-asan
	$(MAKE) fuzz-check
	$(MAKE) check-paths
	$(MAKE) check-arch
	$(MAKE) e2e

# One door to paths a user can write (docs/security.md): no open/fopen/
# opendir/nftw/remove/read_file outside core/upath.h in the root's modules.
check-paths:
	sh scripts/check-paths.sh

# The invariants of docs/ARCHITECTURE.md: processes only from core/proc.c, no
# printing from library code but its named console paths, job-state words only
# in jobs/, no store_* calls from launch/, no cmd/ includes from the library,
# and a map that names every source file (scripts/check-arch.py says why each
# exception is one).
check-arch:
	$(PYTHON) scripts/check-arch.py

# libFuzzer harnesses (tests/fuzz/, docs/fuzzing.md): clang, ASan + UBSan,
# the same sources as the binary.  FUZZ_TARGETS picks some ("spec api").
fuzz-build: web/node_modules/uplot
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=$(CLANG) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DTC_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) fuzz $(FUZZ_TARGETS)

fuzz-check: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CHECK_SECONDS) check $(FUZZ_TARGETS)

# the web UI builds no HTML from values: textContent or its one escaping helper
# (docs/security.md, "The page")
.PHONY: check-web
check-web:
	$(PYTHON) scripts/check-web-html.py

# man pages from the built binary's --help and docs/spec.md (scripts/man.py);
# make install installs them too
.PHONY: man deb install-man
man: build
	$(PYTHON) scripts/man.py $(BUILD)/trainctl $(BUILD)/man docs/spec.md

install: install-man
install-man: man
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(BUILD)/man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/

# trainctl_VERSION_ARCH.deb in $(BUILD) (packaging/deb/build.sh, docs/install.md)
deb: build
	packaging/deb/build.sh $(BUILD) $(BUILD)

bench: build
	$(PYTHON) bench/launch.py

install: build install-python
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/trainctl $(DESTDIR)$(PREFIX)/bin/trainctl

install-python:
	install -d $(DESTDIR)$(PYTHON_SITE)/trainctl
	install -m 0644 python/trainctl/*.py python/trainctl/py.typed $(DESTDIR)$(PYTHON_SITE)/trainctl/

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
