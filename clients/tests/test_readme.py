"""The README's Python lines work as printed."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def run_block(index: int, uri: str) -> str:
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[index]
    run = subprocess.run(
        [sys.executable, "-c", code.replace("grpc://127.0.0.1:32010", uri)],
        capture_output=True, text=True, timeout=120, cwd=README.parent / "clients",
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_readme_python_lines_run_against_a_server(server):
    adbc_output = run_block(0, server.uri)
    assert '["eu","us"]' in adbc_output
    assert "[[1,1]]" in adbc_output
    flight_output = run_block(1, server.uri)
    assert "pyarrow.Table" in flight_output and "region" in flight_output
