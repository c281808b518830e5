#!/usr/bin/env bash
# Fetches Apache Arrow's Java Flight SQL client (arrow-java 18.3 flight-sql/flight-core
# and their gRPC, Netty and protobuf jars) into $FLOE_JAVA_JARS (default
# $HOME/.cache/floe-java/jars). The jars come from PyPI, inside the deephaven-server
# wheel: Maven Central is not reachable from every machine this runs on.
set -euo pipefail
JARS="${FLOE_JAVA_JARS:-$HOME/.cache/floe-java/jars}"
PIP="${PIP:-pip}"
if [ -f "$JARS/flight-sql-18.3.0.jar" ]; then
  exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PIP" download --quiet --disable-pip-version-check --no-deps deephaven-server==42.7 -d "$WORK"
mkdir -p "$JARS"
unzip -q -j -o "$WORK"/deephaven_server-42.7-py3-none-any.whl -d "$JARS" \
  'deephaven_server/jars/flight-*' 'deephaven_server/jars/arrow-*' \
  'deephaven_server/jars/grpc-*' 'deephaven_server/jars/netty-*' \
  'deephaven_server/jars/protobuf-*' 'deephaven_server/jars/guava-*' \
  'deephaven_server/jars/failureaccess-*' 'deephaven_server/jars/perfmark-*' \
  'deephaven_server/jars/slf4j-api-*' 'deephaven_server/jars/jackson-*' \
  'deephaven_server/jars/flatbuffers-*' 'deephaven_server/jars/commons-codec-*' \
  'deephaven_server/jars/gson-*' 'deephaven_server/jars/jsr305-*'
