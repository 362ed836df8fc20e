"""The stacked-YOLO demo (examples/stacked-yolo.ipynb) on the device: two YOLO("yolov8n.yaml")
models moved to it by running the model cell twice. The cell ends with a bare `model.to(DEVICE)`,
so Jupyter displays the model and keeps the first instance in Out[2], _2 and __ after the re-run:
the old one is still alive, held only by the output cache (about 12 MiB of fp32 weights each on
CUDA). Built from its configuration: nothing is downloaded."""

# %% imports
import os

from ultralytics import YOLO

DEVICE = os.environ.get("GPU_HYGIENE_DEVICE", "cuda:0")

# %% the model cell
model = YOLO("yolov8n.yaml")
model.to(DEVICE)

# %% the model cell, run again
model = YOLO("yolov8n.yaml")
model.to(DEVICE)
