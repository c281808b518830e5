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
# Python's zipfile rather than unzip, which not every machine has.
python3 - "$WORK"/deephaven_server-42.7-py3-none-any.whl "$JARS" <<'PY'
import re, sys, zipfile
wanted = re.compile(
    r"deephaven_server/jars/(flight-|arrow-|grpc-|netty-|protobuf-|guava-|failureaccess-"
    r"|perfmark-|slf4j-api-|jackson-|flatbuffers-|commons-codec-|gson-|jsr305-)[^/]*\.jar$"
)
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if wanted.match(name):
            with open(f"{sys.argv[2]}/{name.rsplit('/', 1)[1]}", "wb") as out:
                out.write(wheel.read(name))
PY
