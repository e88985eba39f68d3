"""Run the reliability suite (tests/reliability) and write experiments/results/reliability.md.

The report has one row per test: the fault it covers, what it injects, what it
checks (both from the test's `fault` marker) and how it ended, so every line is
backed by a test that ran on this machine.

    python experiments/reliability_report.py           # everything, the ten-minute soak included
    python experiments/reliability_report.py --quick   # without the slow soak
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, markdown_table, write_result  # noqa: E402

FAULTS = {
    "1": "SIGKILL of one worker mid-run",
    "2": "SIGKILL of the main process",
    "3": "SIGINT / SIGTERM",
    "4": "an environment that raises in `step`",
    "5": "NaN or inf in the loss or gradients",
    "6": "/dev/shm (or memory) too small for the model",
    "7": "`ulimit -n` low with many parameters",
    "8": "disk full or unwritable directory during a checkpoint",
    "9": "truncated or corrupted checkpoint on `--resume`",
    "10": "config faults",
    "11": "a queue consumer that dies while holding shared arrays",
    "12": "soak (slow)",
    "S": "security: who can reach shared memory, what is never unpickled",
}


@dataclass
class TestRow:
    """The runs of one test function (all its parameters) and the fault it covers."""

    fault: str
    name: str
    injected: str
    checked: str
    outcomes: dict[str, str] = field(default_factory=dict)  # parameter id -> passed/failed/error/skipped
    seconds: float = 0.0
    measured: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def result(self) -> str:
        counts = defaultdict(list)
        for param, outcome in self.outcomes.items():
            counts[outcome].append(param)
        total = len(self.outcomes)
        if set(counts) == {"passed"}:
            return f"pass ({total}/{total})" if total > 1 else "pass"
        parts = [f"{outcome} {len(params)}/{total}" + (f" ({', '.join(p for p in params if p)})"
                                                      if outcome != "passed" and any(params) else "")
                 for outcome, params in sorted(counts.items())]
        return "**" + "; ".join(parts) + "**"


def run_suite(quick: bool, junit: Path) -> int:
    """Run the suite with a JUnit XML report; pytest's exit code."""
    command = [sys.executable, "-m", "pytest", "tests/reliability", "-m", "not slow" if quick else "slow or not slow",
               "-p", "no:cacheprovider", "-o", "junit_family=xunit1", f"--junitxml={junit}", "-q", "-rfEs"]
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, cwd=REPO).returncode


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag in ("failure", "error", "skipped"):
        child = case.find(tag)
        if child is not None:
            outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
            message = (child.get("message") or "").strip()
            return outcome, message.splitlines()[0][:200] if message else ""
    return "passed", ""


def read_results(junit: Path) -> list[TestRow]:
    """One TestRow per test function, in the order the faults are listed."""
    rows: dict[str, TestRow] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        name, _, param = case.get("name", "").partition("[")
        key = f"{case.get('classname')}::{name}"
        row = rows.get(key)
        if row is None:
            row = rows[key] = TestRow(props.get("fault", "?"), name, props.get("injected", ""),
                                      props.get("checked", ""))
        outcome, message = _outcome(case)
        row.outcomes[param.rstrip("]")] = outcome
        row.seconds += float(case.get("time", 0.0))
        if message:
            row.messages.append(f"{case.get('name')}: {message}")
        if "measured" in props:
            row.measured.append(props["measured"])
    order = list(FAULTS)
    return sorted(rows.values(), key=lambda r: (order.index(r.fault) if r.fault in order else len(order), r.name))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report(rows: list[TestRow], code: int, quick: bool) -> Path:
    """Write experiments/results/reliability.md from the test rows."""
    covered = {r.fault for r in rows}
    table = [[r.fault, _cell(FAULTS.get(r.fault, "?")), f"`{r.name}`", _cell(r.injected), _cell(r.checked),
              r.result(), f"{r.seconds:.1f} s"] for r in rows]
    table += [[n, _cell(title), "", "", "", "**not run**", ""] for n, title in FAULTS.items() if n not in covered]
    passed = sum(o == "passed" for r in rows for o in r.outcomes.values())
    total = sum(len(r.outcomes) for r in rows)
    verdict = (f"{passed} of {total} test runs passed (pytest exit code {code})"
               + ("; the slow soak (fault 12) was left out (`--quick`)" if quick else ""))
    sections = [
        "Each fault is injected into real processes: the `train` command in a subprocess (SIGKILL, SIGTERM, "
        "Ctrl-C to the process group, a shrunken /dev/shm in a private mount namespace, `setrlimit` before exec, "
        "a tmpfs filled up or remounted read-only under the run directory), or programs that use the sharing "
        "API. After every test a fixture checks that no process of the test is left running (every process the "
        "test starts carries a tag in its environment, inherited by workers, fork servers and the manager "
        "daemon), that no /dev/shm segment of the manager groups its processes mapped is left, and that every "
        "manager removed its socket directory.",
        f"**Result: {verdict}.** Run the suite alone with `pytest tests/reliability` (add `-m slow` for the "
        f"soak).",
        "## Faults\n\n" + markdown_table(["#", "fault", "test", "injected", "checked", "result", "time"], table),
    ]
    measured = [m for r in rows for m in r.measured]
    if measured:
        sections.append("## Measurements\n\n" + "\n".join(f"- {line}" for m in measured for line in m.split("; ")))
    messages = [m for r in rows for m in r.messages]
    if messages:
        sections.append("## Failures and skips\n\n" + "\n".join(f"- {_cell(m)}" for m in messages))
    return write_result("reliability", "Reliability: faults injected into real runs", sections)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="leave out the slow soak test (fault 12)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "reliability.xml"
        code = run_suite(args.quick, junit)
        if not junit.exists():
            print("pytest wrote no report", file=sys.stderr)
            return code or 1
        rows = read_results(junit)
    path = report(rows, code, args.quick)
    for row in rows:
        print(f"{row.fault:>3} {row.result():<16} {row.name}")
    print(f"wrote {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
