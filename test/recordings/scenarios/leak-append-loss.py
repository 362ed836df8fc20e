"""A custom training loop of a small conv net that keeps a graph per step: after each training step
it computes the step's held-out loss without torch.no_grad() and appends the tensor
(`val_losses.append(val_loss)`, not `.item()`), so every step keeps that forward's autograd graph
and its activations alive (about 88 MiB at batch 64 of 3x64x64 images: ReLU outputs, max-pool
indices, the inputs the layers save for backward). PyTorch's allocated memory climbs while the
training cell runs (6 epochs of 10 steps: about 5.1 GiB on CUDA, ~21 s) and again when the cell
is run a second time (about 10.3 GiB in all). The training losses themselves go through
backward(), which frees their graphs. Random tensors stand in for data; each step waits PACE_S
seconds, standing in for a data loader, so the climb spans the sampler's ticks. Marks: `epoch`
after each epoch (`epoch`, `allocated` bytes or null on the CPU)."""

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
        val_losses.append(val_loss)  # the bug: keeps the graph and its activations alive
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
        val_losses.append(val_loss)  # the bug: keeps the graph and its activations alive
        time.sleep(PACE_S)
    epoch += 1
    print("@@mark epoch", json.dumps({"epoch": epoch, "allocated": allocated()}), flush=True)

# %% how it looks
print(f"{len(val_losses)} held-out losses kept as tensors; allocated {allocated()}")
