"""The leaking loop of leak-append-loss (each step's held-out loss appended as a tensor, about
88 MiB of graph and activations kept per step on CUDA) in a process whose caching allocator is
capped with torch.cuda.set_per_process_memory_fraction(f), f = CAP_GIB GiB / the device's total
memory (8 GiB of an H200's 139.8 GiB: f = 0.057). The training cell runs up to 20 epochs of 10
steps and fails with torch.OutOfMemoryError when the cap is reached, after about 90 steps (about
35 s on the H200), far below the device's own memory; the cell after it looks at what is left.
On the CPU there is no cap and no failure: the loop runs 2 epochs. Marks: `cap` (the fraction and
the bytes it allows), `epoch` after each epoch (`epoch`, `allocated` bytes or null on the CPU)."""

# %% setup, the allocator capped
import json
import os
import time

import torch
from torch import nn

DEVICE = os.environ.get("GPU_HYGIENE_DEVICE", "cuda:0")
CUDA = DEVICE.startswith("cuda")
BATCH = 64 if CUDA else 4
STEPS = 10  # steps per epoch
EPOCHS = 20 if CUDA else 2  # more than the cap allows on CUDA
PACE_S = 0.35 if CUDA else 0.05
CAP_GIB = float(os.environ.get("GPU_HYGIENE_CAP_GIB", "8"))


def allocated():
    return torch.cuda.memory_allocated(DEVICE) if CUDA else None


if CUDA:
    total = torch.cuda.get_device_properties(DEVICE).total_memory
    fraction = CAP_GIB * 2**30 / total
    torch.cuda.set_per_process_memory_fraction(fraction, DEVICE)
    print("@@mark cap", json.dumps({"fraction": fraction, "bytes": int(fraction * total)}))

# %% net, optimizer, data
torch.manual_seed(0)
net = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 16 * 16, 10),
).to(DEVICE)  # fmt: skip
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
crit = nn.CrossEntropyLoss()
images = torch.randn(STEPS, BATCH, 3, 64, 64, device=DEVICE)
labels = torch.randint(0, 10, (STEPS, BATCH), device=DEVICE)
xv = torch.randn(BATCH, 3, 64, 64, device=DEVICE)
yv = torch.randint(0, 10, (BATCH,), device=DEVICE)
train_losses, val_losses = [], []
epoch = 0

# %% training loop, into the cap [raises on cuda]
for _ in range(EPOCHS):
    for step in range(STEPS):
        opt.zero_grad()
        loss = crit(net(images[step]), labels[step])
        loss.backward()
        opt.step()
        train_losses.append(loss.item())
        val_loss = crit(net(xv), yv)  # no torch.no_grad(): this forward builds a graph
        val_losses.append(val_loss)  # the bug: keeps the graph and its activations alive
        time.sleep(PACE_S)
    epoch += 1
    print("@@mark epoch", json.dumps({"epoch": epoch, "allocated": allocated()}), flush=True)

# %% after the failure
print(f"{len(val_losses)} held-out losses kept as tensors; allocated {allocated()}")
