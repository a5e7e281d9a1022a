"""The planner-regret benchmark (bench/planner_regret.py) end to end in its --quick form: it
calibrates, enumerates, compiles under a budget, runs and writes well-formed JSON and Markdown.
No timing is asserted (the machine is shared); the structure and the bookkeeping are."""

import json
import subprocess
import sys

from conftest import REPO_ROOT

DRIVER = REPO_ROOT / "bench" / "planner_regret.py"


def test_quick_run_is_well_formed(sl_tools, tmp_path):
    out_json, out_md = tmp_path / "regret.json", tmp_path / "regret.md"
    proc = subprocess.run([sys.executable, str(DRIVER), "--quick", "--sl-opt", sl_tools.sl_opt,
                           "--sl-run", sl_tools.sl_run, "--work", tmp_path / "work",
                           "--json", out_json, "--record", out_md],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout
    res = json.loads(out_json.read_text())

    # Every (b, N = batch / b, K) of the quick model: batch 2, 2 layers.
    assert res["quick"] and res["batch"] == 2 and res["model"]["layers"] == 2
    names = {c["name"] for c in res["configs"]}
    assert names == {"b1-n2-k1", "b1-n2-k2", "b2-n1-k1", "b2-n1-k2"}
    for c in res["configs"]:
        assert c["sub_batch_size"] * c["num_sub_batches"] == res["batch"]
        assert c["predicted_step_seconds"] > 0 and c["measured_step_seconds"] > 0
        assert len(c["runs_step_seconds"]) == res["repeats"] == 1
        assert c["prediction_error"] == c["predicted_step_seconds"] / c["measured_step_seconds"] - 1
        # sl-plan predicts the arena to the byte below 16 sub-batches.
        assert c["device_arena_bytes"] == c["predicted_device_bytes"]

    # One budget, the largest predicted arena: everything fits, and the pick is one of them.
    (row,) = res["budgets"]
    assert row["budget_bytes"] == max(c["predicted_device_bytes"] for c in res["configs"])
    assert sorted(row["feasible"]) == sorted(names) and row["refused"] == []
    pick = row["pick"]
    assert pick["feasible"] and pick["same_schedule_as_explicit"]
    assert row["pick_arena_within_budget"]
    assert pick["live_blocks"] == 1  # the planner keeps K = 1 unless told
    best = min(res["configs"], key=lambda c: c["measured_step_seconds"])
    assert row["best"]["name"] == best["name"]
    assert row["regret"] == pick["measured_step_seconds"] / best["measured_step_seconds"] - 1
    assert row["regret"] >= 0

    s = res["summary"]
    assert s["max_regret"] == row["regret"]
    assert s["max_abs_prediction_error"] == max(abs(c["prediction_error"]) for c in res["configs"])
    assert s["regret_met"] == (s["max_regret"] <= 0.10)
    assert s["prediction_met"] == (s["max_abs_prediction_error"] <= 0.25)
    assert s["regret_target"] == 0.10 and s["prediction_target"] == 0.25
    assert res["profile"]["f32_tflops"] > 0 and res["profile"]["link_gbps"] > 0
    assert len(res["load_average"]) == 1 + res["repeats"]
    assert res["command"].startswith("PYTHONPATH=python /usr/bin/python3 bench/planner_regret.py")

    # The Markdown is the one printed, with a row per configuration and per budget.
    md = out_md.read_text()
    assert md in proc.stdout
    assert res["commit"] in md and res["command"] in md
    config_rows = [line for line in md.splitlines() if line.startswith("| 1 |")
                   or line.startswith("| 2 |")]
    assert len(config_rows) == 4
    budget_row = next(line for line in md.splitlines()
                      if line.startswith(f"| {row['budget']} |"))
    assert f"| {pick['name']} |" in budget_row and f"{row['regret']:+.1%}" in budget_row


def test_bad_budget_is_named(sl_tools, tmp_path):
    proc = subprocess.run([sys.executable, str(DRIVER), "--quick", "--sl-opt", sl_tools.sl_opt,
                           "--sl-run", sl_tools.sl_run, "--work", tmp_path, "--budgets", "lots"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode != 0
    assert "not a byte size: 'lots'" in proc.stdout
