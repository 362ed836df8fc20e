"""The custom training loop of leak-append-loss, fixed: each step's held-out loss is appended as
a number (`val_losses.append(val_loss.item())`), so its graph is freed at once and PyTorch's
allocated memory stays flat through both runs of the training cell (the net, its gradients, the
optimizer's momentum and the data: about 40 MiB on CUDA). Same net, data, steps and pace as
leak-append-loss (PACE_S per step stands in for a data loader). Marks: `epoch` after each epoch
(`epoch`, `allocated` bytes or null on the CPU)."""

# %% setup
import json
import os
import time

import torch
from torch import nn

DEVICE = os.environ.get("GPU_HYGIENE_DEVICE", "cuda:0")
CUDA = DEVICE.startswith("cuda")
BATCH = 64 if CUDA else 4
STEPS = 10  # steps per epoch
EPOCHS = 6 if CUDA else 2  # epochs per run of the training cell
PACE_S = 0.35 if CUDA else 0.05


def allocated():
    return torch.cuda.memory_allocated(DEVICE) if CUDA else None


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

# %% training loop
for _ in range(EPOCHS):
    for step in range(STEPS):
        opt.zero_grad()
        loss = crit(net(images[step]), labels[step])
        loss.backward()
        opt.step()
        train_losses.append(loss.item())
        val_loss = crit(net(xv), yv)  # no torch.no_grad(): this forward builds a graph
        val_losses.append(val_loss.item())  # the fix: a float; the graph is freed now
        time.sleep(PACE_S)
    epoch += 1
    print("@@mark epoch", json.dumps({"epoch": epoch, "allocated": allocated()}), flush=True)

# %% training loop, run again
for _ in range(EPOCHS):
    for step in range(STEPS):
        opt.zero_grad()
        loss = crit(net(images[step]), labels[step])
        loss.backward()
        opt.step()
        train_losses.append(loss.item())
        val_loss = crit(net(xv), yv)  # no torch.no_grad(): this forward builds a graph
        val_losses.append(val_loss.item())  # the fix: a float; the graph is freed now
        time.sleep(PACE_S)
    epoch += 1
    print("@@mark epoch", json.dumps({"epoch": epoch, "allocated": allocated()}), flush=True)

# %% how it looks
print(f"{len(val_losses)} held-out losses kept as floats; allocated {allocated()}")
