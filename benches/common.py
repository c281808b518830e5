"""What the TPC-H-based benchmarks share: where their data lives, and Floe run as a
coordinator with two 1-slot `floe executor` processes."""

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
import tpch  # noqa: E402
from conftest import Server  # noqa: E402

SCALE = float(os.environ.get("FLOE_BENCH_SCALE", 1))


def bench_data() -> tuple[Path, Path]:
    """(FLOE_BENCH_DIR, or a fresh directory; the generated TPC-H data in it)."""
    root = Path(os.environ.get("FLOE_BENCH_DIR", tempfile.mkdtemp(prefix="floe-tpch-")))
    return root, tpch.generate(SCALE, root / f"sf{SCALE:g}")


def on_two_executors(root: Path, run):
    """`run(server)` against the benchmark's catalog, served by a coordinator without
    in-process executors and two `floe executor` processes of one slot each."""
    server = Server(root / "floe", ["--local-executors", "0", "--local-query-max-bytes", "0"])
    executors = [server.start_executor(root / f"executor{i}.log", slots=1) for i in range(2)]
    try:
        return run(server)
    finally:
        for executor in executors:
            executor.stop()
        server.stop()


def cpu_seconds(pid):
    """User + system CPU seconds process `pid` has used so far. The kernel counts them in
    10 ms ticks: over 50 runs, 0.2 ms per statement. Steadier than latency on a busy host."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
