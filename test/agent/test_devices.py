"""Device figures (NVML, torch allocator) in fresh Python processes, with the real pynvml and
torch. On a machine without an NVIDIA driver (CI, this project's machines) the NVML checks
become "NVML is reported unavailable"; on a GPU machine they check real numbers and that the
agent creates no CUDA context."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

pytestmark = pytest.mark.timeout(120)

MiB = 2**20

# the agent's device module, from the package loaded as the loader registers it (kernel_driver
# imports only the standard library at import time)
PRELUDE = f"""
import json, os, sys
sys.path.insert(0, {str(ROOT / "test" / "agent")!r})
from kernel_driver import load_agent
agent = load_agent("_agent_under_test").devices
def nvml_pids():
    import pynvml
    return sorted(p.pid for i in range(pynvml.nvmlDeviceGetCount())
                  for p in pynvml.nvmlDeviceGetComputeRunningProcesses(
                      pynvml.nvmlDeviceGetHandleByIndex(i)))
"""


def run_python(body, env=None):
    """Run PRELUDE + body in a fresh interpreter; it prints one JSON document."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def nvml_works():
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    pynvml.nvmlShutdown()
    return True


NVML = nvml_works()


def test_no_cuda_context_and_no_figures_before_cuda_is_used():
    out = run_python(
        """
        import torch
        sampler = agent.DeviceSampler()
        sampler.start()
        samples = [sampler.sample() for _ in range(3)]
        print(json.dumps({
            "nvml": sampler.nvml is not None, "error": sampler.nvml_error,
            "described": sampler.describe(), "samples": samples,
            "cuda_initialized": torch.cuda.is_initialized(),
            "pid_on_gpu": sampler.nvml is not None and os.getpid() in nvml_pids(),
        }))
        """
    )
    assert out["cuda_initialized"] is False
    assert out["pid_on_gpu"] is False  # the agent created no CUDA context
    if not NVML:
        assert out["nvml"] is False and "NVML" in out["error"]
        assert out["described"] == [] and out["samples"] == [[], [], []]
        return
    assert out["nvml"] is True and out["error"] is None
    assert [d["index"] for d in out["described"]] == list(range(len(out["described"])))
    for samples in out["samples"]:
        for entry, described in zip(samples, out["described"]):
            assert entry["index"] == described["index"]
            assert 0 <= entry["used"] <= entry["total"] == described["total"]
            assert entry["process"] == 0
            assert entry["allocated"] is None and entry["reserved"] is None


@pytest.mark.skipif(not NVML, reason="no NVIDIA driver here")
def test_figures_once_cuda_is_used():
    out = run_python(
        """
        import subprocess, torch
        sampler = agent.DeviceSampler()
        sampler.start()
        blob = torch.empty(1024 * 2**20, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        (entry, *_rest) = sampler.sample()
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True).stdout.strip()
        print(json.dumps({"entry": entry, "smi_used_mib": float(smi) if smi else None}))
        """
    )
    entry = out["entry"]
    assert entry["allocated"] >= 1024 * MiB
    assert entry["reserved"] >= entry["allocated"]
    # the process share includes the CUDA context; None if NVML reports pids of another
    # namespace (containers)
    assert entry["process"] is None or entry["process"] >= entry["reserved"]
    assert entry["used"] >= entry["reserved"]
    if out["smi_used_mib"] is not None:  # v2 "used" is what nvidia-smi shows
        assert abs(entry["used"] / MiB - out["smi_used_mib"]) < 64, out


@pytest.mark.skipif(not NVML, reason="no NVIDIA driver here")
def test_cuda_visible_devices_by_uuid():
    first = run_python(
        """
        sampler = agent.DeviceSampler()
        sampler.start()
        print(json.dumps(sampler.describe()))
        """
    )
    last = first[-1]
    out = run_python(
        """
        sampler = agent.DeviceSampler()
        sampler.start()
        print(json.dumps(sampler.describe()))
        """,
        env={"CUDA_VISIBLE_DEVICES": last["uuid"]},
    )
    assert out == [dict(last, index=0)]
