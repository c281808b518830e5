#!/usr/bin/env bash
# Floe's test command: builds Floe, installs the Python clients, runs every test.
# Rust tests: one integration-test binary (tests/main.rs). End-to-end tests: pytest in
# clients/tests against real `floe serve` / `floe executor` processes.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/floe-target}"
VENV="${FLOE_TEST_VENV:-$HOME/.cache/floe-venv}"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r clients/requirements.txt
# Superset's Flight SQL dialect pins SQLAlchemy < 2: it gets a virtualenv of its own.
SUPERSET_VENV="${FLOE_SUPERSET_VENV:-$HOME/.cache/floe-venv-superset}"
if [ ! -x "$SUPERSET_VENV/bin/python" ]; then
  python3 -m venv "$SUPERSET_VENV"
fi
"$SUPERSET_VENV/bin/pip" install --quiet --disable-pip-version-check -r clients/requirements-superset.txt
# PostgreSQL server for the shared SQL catalog tests (clients/tests/services.py).
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
fi
# Apache Arrow's Java Flight SQL client, for the JDBC call-order test.
PIP="$VENV/bin/pip" clients/java/fetch-jars.sh

cargo build --bins
cargo test
FLOE_BIN="$CARGO_TARGET_DIR/debug/floe" "$VENV/bin/python" -m pytest -q clients/tests "$@"
