"""CPU smoke session for the recorder's and the replay kernel's tests, and the recording the
replay Galata spec plays (cpu-smoke.jsonl is recorded on the CPU: its samples list no devices,
VRAM figures are null). A small torch MLP (Linear(1024, 1024), ReLU, Linear(1024, 10): 4.0 MiB
of fp32 weights) is built by a cell that ends with the bare model, run twice, so the older
instance is held only by the output cache (Out[2], _2, __); then a validation loop keeps four
losses' autograd graphs in a list (no torch.no_grad()), and a shape error leaves a traceback.
Marks: `step` after each validation step. Not one of the GPU scenarios (those are in
scenarios/): record it with `scripts/record_session.py --device cpu --only
test/recordings/cpu-smoke.py`."""

# %% imports
import json
import os

import torch

DEVICE = os.environ.get("GPU_HYGIENE_DEVICE", "cuda:0")

# %% the model cell
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
).to(DEVICE)
model

# %% the model cell, run again
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
).to(DEVICE)
model

# %% validation losses kept as tensors
xb = torch.randn(256, 1024, device=DEVICE)
yb = torch.randint(0, 10, (256,), device=DEVICE)
val_losses = []
for step in range(4):
    val_losses.append(torch.nn.functional.cross_entropy(model(xb), yb))
    print("@@mark step", json.dumps({"step": step}), flush=True)

# %% a shape error [raises]
model(torch.randn(2, 3, device=DEVICE))
