"""A real Ultralytics training, offline: YOLO("yolov8n.yaml") (built from its configuration, nothing
downloaded) trained with model.train(..., amp=False, plots=False, save=False, val=True) for a few
epochs on a synthetic dataset written to a temporary folder (random images, one coloured box
each, YOLO-format labels, as test/agent/checks.py's make_dataset writes them). On CUDA: 128
training and 16 validation images of 320 px, batch 16, 10 epochs, each batch followed by a PACE_S
pause standing in for a data loader (an epoch then lasts ~1.5-2 s, longer than the sampler
period); on the CPU: 4 and 2 images of 64 px, batch 2, 1 epoch. The results are named (`results =
model.train(...)`), so the trainer stays reachable from the model afterwards. Marks: `epoch` at
each training epoch's end (the trainer's 0-based `epoch`, its `epochs`), from an Ultralytics
callback."""

# %% setup, dataset
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

DEVICE = os.environ.get("GPU_HYGIENE_DEVICE", "cuda:0")
CUDA = DEVICE.startswith("cuda")
N_TRAIN, N_VAL, SIZE = (128, 16, 320) if CUDA else (4, 2, 64)
BATCH, EPOCHS = (16, 10) if CUDA else (2, 1)
PACE_S = 0.15 if CUDA else 0.0

try:
    import polars  # noqa: F401
except ImportError:  # results.csv is then not read back (the trainer's only use of polars)
    from ultralytics.engine.trainer import BaseTrainer

    BaseTrainer.read_results_csv = lambda self: {}

root = Path(tempfile.mkdtemp(prefix="yolo-train-"))
rng = np.random.default_rng(0)
for split, count in (("train", N_TRAIN), ("val", N_VAL)):
    (root / "images" / split).mkdir(parents=True)
    (root / "labels" / split).mkdir(parents=True)
    for i in range(count):
        img = (rng.random((SIZE, SIZE, 3)) * 255).astype("uint8")
        w, h = (int(v) for v in rng.integers(SIZE // 8, SIZE // 2, 2))
        x0, y0 = (int(v) for v in rng.integers(0, SIZE - max(w, h), 2))
        img[y0 : y0 + h, x0 : x0 + w] = (255, 64, 0)
        Image.fromarray(img).save(root / "images" / split / f"{i}.jpg")
        box = ((x0 + w / 2) / SIZE, (y0 + h / 2) / SIZE, w / SIZE, h / SIZE)
        (root / "labels" / split / f"{i}.txt").write_text("0 " + " ".join(f"{v:.6f}" for v in box))
data = root / "data.yaml"
data.write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: box\n")

# %% the model
from ultralytics import YOLO

model = YOLO("yolov8n.yaml")
model.add_callback(
    "on_train_epoch_end",
    lambda trainer: print(
        "@@mark epoch", json.dumps({"epoch": trainer.epoch, "epochs": trainer.epochs}), flush=True
    ),
)
model.add_callback("on_train_batch_end", lambda trainer: time.sleep(PACE_S))

# %% training
results = model.train(
    data=str(data), epochs=EPOCHS, imgsz=SIZE, batch=BATCH, workers=0, device=DEVICE,
    amp=False, plots=False, save=False, val=True, project=str(root / "runs"), name="train",
    exist_ok=True, verbose=False,
)  # fmt: skip
