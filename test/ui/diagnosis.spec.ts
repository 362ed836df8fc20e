/**
 * Browser test of protocol 2's answers: a real JupyterLab server, a real
 * ipykernel with torch and Ultralytics on the CPU, the built extension,
 * Debian chromium.
 *
 * A YOLO model with a trainer-like object holding an EMA copy shows that copy
 * as a part of the model in the panel; a list of losses is listed as a
 * variable keeping autograd graphs; a CUDA out-of-memory error gives an error
 * toast with Clean GPU, Restart kernel and the advice for the installed
 * Ultralytics.
 *
 * Mocked, because this machine has no GPU: the cell raises torch's own
 * `torch.OutOfMemoryError` with the text torch >= 2.1 writes. Everything
 * after that (the agent's parsing, the `oom` message, the toast) is real.
 */
import { expect, test } from '@jupyterlab/galata';
import { collectNoise, openPanelFromGauge } from './probes';
import { setCellSource } from './notebook-file';

test.use({ autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';

const OOM =
  'CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 GiB ' +
  'of which 3.19 MiB is free. Process 4242 has 79.18 GiB memory in use.';

test('parts, graph holders and the out-of-memory diagnosis', async ({
  page
}) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);

  await page.notebook.createNew('diagnosis.ipynb', { kernel: 'python3' });
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await setCellSource(
    page,
    0,
    [
      'import copy, types, torch',
      'from ultralytics import YOLO',
      "model = YOLO('yolov8n.yaml')",
      'model.trainer = types.SimpleNamespace(ema=copy.deepcopy(model.model))'
    ].join('\n')
  );
  await page.notebook.runCell(0);
  // running a cell advances to a new empty cell below it
  await setCellSource(
    page,
    1,
    [
      'w = torch.ones(256, 256, requires_grad=True)',
      'val_losses = [(w * 2).relu().sum() for _ in range(4)]'
    ].join('\n')
  );
  await page.notebook.runCell(1);
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');

  await openPanelFromGauge(page);
  const panel = page.locator('#jp-GpuHygiene-panel');
  const part = panel.locator('.jp-GpuHygiene-partRow');
  await expect(part).toHaveCount(1);
  await expect(part).toContainText('trainer.ema');
  await expect(part).toContainText('DetectionModel');
  const graphs = panel.locator('.jp-GpuHygiene-graphs');
  await expect(graphs).toContainText('val_losses');
  await expect(graphs).toContainText('4 in a list');
  await expect(graphs).toContainText('SumBackward0');

  await setCellSource(
    page,
    2,
    `raise torch.OutOfMemoryError(${JSON.stringify(OOM)})`
  );
  await page.notebook.runCell(2);
  const oomToast = page
    .locator(toast)
    .filter({ hasText: 'CUDA out of memory in cell [3]' });
  await expect(oomToast).toHaveCount(1);
  await expect(oomToast).toContainText('tried to allocate 20.0 MiB');
  await expect(oomToast).toContainText('3.2 MiB free of 79.2 GiB');
  for (const label of ['Clean GPU', 'Restart kernel', 'What to try…']) {
    await expect(oomToast.getByRole('button', { name: label })).toHaveCount(1);
  }
  await oomToast.getByRole('button', { name: 'What to try…' }).click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Tried to allocate');
  // Ultralytics 8.4.190 here: fractional AutoBatch exists (from 8.2.29)
  const advice = dialog.locator('.jp-GpuHygiene-oomAdvice');
  await expect(advice).toContainText('batch=-1');
  await expect(advice).toContainText('batch=0.70 to aim at 70% of its memory');
  await expect(advice).toContainText('nbs=64');
  await dialog.getByRole('button').last().click();
  await expect(dialog).toHaveCount(0);

  // the same cell failing again is a new cell: one more toast, not a duplicate
  await page.notebook.runCell(2);
  await expect(
    page.locator(toast).filter({ hasText: 'CUDA out of memory in cell [4]' })
  ).toHaveCount(1);
  expect(noise).toEqual([]);
});
