"""The committed benchmark (``bench/results.json``, written by ``make bench``) is of the agent in
this tree: same ``agentVersion`` as ``AGENT_VERSION`` in the agent's ``limits.py``, the full
matrix, and the rows the goals are read at (issue 3 and issue 14: 2e6 objects x 10 models, with
the rebinding cell's figures; issue 31: 1e4 and 1e5 user variables). Read from the files, no
kernel."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results.json"
LIMITS = ROOT / "src" / "agent" / "gpu_hygiene_agent" / "limits.py"
REGENERATE = (
    "regenerate it with `make bench` (the full matrix, ~7 min on a quiet 2-core machine, then "
    "make bench-start, ~2 min; it writes "
    "bench/results.json and bench/profile.txt), then commit both"
)
# the goal configuration and what its row must carry (docs/benchmarks.md, bench/bench.py)
GOAL_ROW = {"objects": 2_000_000, "models": 10}
GOAL_FIELDS = (
    "agent_p95_ms",
    "agent_full_p50_ms",
    "agent_full_p95_ms",
    "agent_full_cpu_p50_ms",
    "naive_ms",
    "naive_ratio",
    "naive_full_ratio",
)


def agent_version():
    text = LIMITS.read_text(encoding="utf-8")
    return re.search(r'^AGENT_VERSION = "(.+)"$', text, re.M).group(1)


def results():
    data = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and "rows" in data, (
        "bench/results.json is a list of rows from before issue 26 (no agentVersion, no "
        f"commit): {REGENERATE}"
    )
    return data


def test_results_are_of_this_agent_version():
    data = results()
    version = agent_version()
    assert data.get("agentVersion") == version, (
        f"bench/results.json is of agent {data.get('agentVersion')}, the tree's agent is "
        f"{version} (limits.py): {REGENERATE}"
    )
    # every row was measured in a kernel running that agent
    assert {row.get("agent_version") for row in data["rows"]} == {version}, REGENERATE
    assert re.fullmatch(r"[0-9a-f]{40}", data.get("commit") or ""), REGENERATE
    assert isinstance(data.get("dirty"), bool), REGENERATE


def test_results_hold_the_full_matrix_and_the_goal_rows():
    data = results()
    assert data.get("fullMatrix") is True, f"not the full matrix: {REGENERATE}"
    configs = {(row["objects"], row["models"], row.get("variables")) for row in data["rows"]}
    expected = {(int(n), m, None) for n in (1e4, 1e5, 1e6, 2e6) for m in (1, 10, 50)}
    # issue 31's rows: 1e4 and 1e5 user variables at 1e4 objects x 1 model
    expected |= {(10_000, 1, 10_000), (10_000, 1, 100_000)}
    assert configs == expected, f"rows {sorted(configs, key=str)}: {REGENERATE}"
    goal = [r for r in data["rows"] if all(r[k] == v for k, v in GOAL_ROW.items())]
    assert len(goal) == 1, f"no row at 2e6 objects x 10 models: {REGENERATE}"
    missing = [f for f in GOAL_FIELDS if not isinstance(goal[0].get(f), (int, float))]
    assert not missing, f"the 2e6 x 10 row lacks {missing}: {REGENERATE}"
    assert goal[0]["cells"] >= 30 and goal[0]["full_skipped"] == 0, REGENERATE
