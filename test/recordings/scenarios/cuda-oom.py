"""A real CUDA out-of-memory error after some real allocations: a model of 16 Linear(4096, 4096)
layers (1 GiB of fp32 weights) and queries and keys of 200,000 tokens x 64 are put on the device,
then a cell computes full attention scores, a 200,000 x 200,000 fp32 matrix (149 GiB), more than
the device has (139.8 GiB on an H200): torch.OutOfMemoryError, raised in the function
`attention`, whose frame the traceback keeps. The cell after it looks at what is left. On the CPU
the sizes are small (512-wide layers, 2,048 tokens) and nothing fails. Marks: `allocated` after
the allocations (bytes, null on the CPU)."""

# %% setup
import json
import os

import torch

DEVICE = os.environ.get("GPU_HYGIENE_DEVICE", "cuda:0")
CUDA = DEVICE.startswith("cuda")
WIDTH = 4096 if CUDA else 512
TOKENS = 200_000 if CUDA else 2_048


def allocated():
    return torch.cuda.memory_allocated(DEVICE) if CUDA else None


# %% a model and the inputs on the device
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(16)]).to(DEVICE)
q = torch.randn(1, TOKENS, 64, device=DEVICE)
k = torch.randn(1, TOKENS, 64, device=DEVICE)
print("@@mark allocated", json.dumps({"allocated": allocated()}))


# %% full attention over every token [raises on cuda]
def attention(q, k):
    scores = q @ k.transpose(-1, -2)  # TOKENS x TOKENS
    return scores.softmax(-1)


out = attention(q, k)

# %% after the failure
print(f"allocated {allocated()}, reserved {torch.cuda.memory_reserved(DEVICE) if CUDA else None}")
