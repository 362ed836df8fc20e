/**
 * Browser test of the findings list at the top of the VRAM panel and the
 * fixes it offers, on a real JupyterLab server, a real ipykernel with torch
 * on the CPU, the built extension and Debian chromium.
 *
 * Real, from the kernel: a hand-written trainer (an owner object: its model,
 * EMA copy, AdamW state and a cache tensor) fixed by "Delete trainer…", a
 * tensor displayed as a cell's value (the output cache; in RAM here, so no
 * Clean GPU is offered), and DataLoader workers kept alive by `persistent_workers=True` fixed by
 * "Drop loader…", each gone from the list once its cell ran.
 *
 * Synthetic, because this machine has no GPU: the second test puts one
 * inventory into the kernel's model with what only CUDA gives (a variable's
 * CUDA tensors shared with another root, PyTorch's fragmented cache), to see
 * those rows and that "Move to CPU…" asks, then inserts a cell that runs in
 * the real kernel on a real variable of that name.
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import { collectNoise, openPanelFromGauge, runNew } from './probes';

test.use({ autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
const panelId = '#jp-GpuHygiene-panel';

const TRAINER = [
  'import copy, torch',
  'class Trainer:',
  '    def __init__(self):',
  '        self.model = torch.nn.Sequential(',
  '            torch.nn.Linear(512, 512), torch.nn.Linear(512, 512))',
  '        self.ema = copy.deepcopy(self.model)',
  '        self.opt = torch.optim.AdamW(self.model.parameters())',
  '        self.model(torch.randn(64, 512)).sum().backward()',
  '        self.opt.step()',
  '        self.cache = torch.zeros(1024, 1024)',
  'trainer = Trainer()'
].join('\n');

const WORKERS = [
  'from torch.utils.data import DataLoader, TensorDataset',
  'loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8,',
  '                    num_workers=2, persistent_workers=True)',
  'batch = next(iter(loader))'
].join('\n');

/** A tiny YOLO dataset (4 + 2 random 64×64 images, one box each) and a trained model. */
const TRAINED = [
  'import pathlib, numpy as np',
  'from PIL import Image',
  'from ultralytics import YOLO',
  "root = pathlib.Path('data').absolute()",
  'rng = np.random.default_rng(0)',
  "for split, n in (('train', 4), ('val', 2)):",
  "    for d in ('images', 'labels'):",
  '        (root / d / split).mkdir(parents=True, exist_ok=True)',
  '    for i in range(n):',
  '        img = (rng.random((64, 64, 3)) * 255).astype("uint8")',
  '        img[8:40, 16:48] = (255, 64, 0)',
  "        Image.fromarray(img).save(root / 'images' / split / f'{i}.jpg')",
  "        (root / 'labels' / split / f'{i}.txt').write_text('0 0.5 0.375 0.5 0.5')",
  "(root / 'data.yaml').write_text(",
  "    f'path: {root}\\ntrain: images/train\\nval: images/val\\nnames:\\n  0: box\\n')",
  "model = YOLO('yolov8n.yaml')",
  "model.train(data=str(root / 'data.yaml'), epochs=1, imgsz=64, batch=2,",
  "            workers=0, device='cpu', plots=False, amp=False, save=False,",
  "            project=str(root.parent / 'runs'), exist_ok=True, verbose=False)",
  'None'
].join('\n');

/** The source of every cell the extension inserted (tagged by it). */
async function insertedSources(page: IJupyterLabPageFixture) {
  return page.evaluate(() => {
    const app = (window as any).jupyterapp;
    const widget = app.shell.currentWidget;
    return widget.content.model.sharedModel.cells
      .filter((c: any) =>
        (c.getMetadata('tags') ?? []).some((t: string) =>
          t.startsWith('gpu-hygiene')
        )
      )
      .map((c: any) => c.getSource());
  });
}

test('findings of a real kernel and the fix of each: owner object, output cache, workers', async ({
  page
}, testInfo) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);
  await page.notebook.createNew('findings.ipynb', { kernel: 'python3' });
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await openPanelFromGauge(page);
  const panel = page.locator(panelId);
  const finding = (kind: string) =>
    panel.locator(`.jp-GpuHygiene-finding[data-kind="${kind}"]`);

  // an owner object: one finding for the trainer, what it holds, its fix
  await runNew(page, TRAINER);
  const owner = finding('owner-object');
  await expect(owner).toHaveCount(1);
  await expect(owner.locator('.jp-GpuHygiene-findingSubject')).toHaveText(
    'trainer'
  );
  // two Linear(512, 512) (2 MiB) and their gradients (2 MiB), the EMA copy
  // (2 MiB), AdamW's two moments (4 MiB), a 4 MiB cache: 14.0 MiB, on the
  // CPU (an info: no toast)
  await expect(owner.locator('.jp-GpuHygiene-findingBytes')).toHaveText(
    '14.0 MiB'
  );
  await expect(owner).toHaveAttribute('data-severity', 'info');
  for (const text of ['EMA copy', 'AdamW state', 'tensors']) {
    await expect(owner.locator('.jp-GpuHygiene-findingText')).toContainText(
      text
    );
  }
  const deleteTrainer = owner.getByRole('button', { name: 'Delete trainer…' });
  await expect(deleteTrainer).toHaveCount(1);
  await deleteTrainer.click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('trainer');
  // the name in code font, and the cell it inserts, shown before it runs
  await expect(dialog.locator('.jp-Dialog-header code')).toHaveText('trainer');
  const preview = await dialog
    .locator('.jp-GpuHygiene-cellPreview')
    .textContent();
  await dialog.locator('.jp-Dialog-content').screenshot({
    path: testInfo.outputPath('delete-dialog.png')
  });
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await expect(owner).toHaveCount(0);
  const sources = await insertedSources(page);
  expect(sources.join('\n')).toContain('"trainer"');
  expect(sources).toContain(preview);
  expect(
    await page.evaluate(async () => {
      const app = (window as any).jupyterapp;
      const kernel = app.shell.currentWidget.sessionContext.session.kernel;
      const reply = await kernel.requestExecute({
        code: "'trainer' in globals()",
        silent: true,
        user_expressions: { r: "'trainer' in globals()" }
      }).done;
      return reply.content.user_expressions.r.data['text/plain'];
    })
  ).toBe('False');

  // a tensor shown as a cell's value: the output cache holds it, in RAM
  // here; Clean GPU drops only entries that hold VRAM, so none is offered
  await runNew(page, 'torch.ones(1024, 1024)');
  const output = finding('output-tensors');
  await expect(output).toHaveCount(1);
  await expect(output).toContainText('The displayed output of cell [3]');
  await expect(output).toContainText('keeps tensors alive in RAM, 4.0 MiB');
  await expect(output).toContainText('No fix from here');
  await expect(output.getByRole('button')).toHaveCount(0);

  // DataLoader workers kept by persistent_workers=True
  await runNew(page, WORKERS);
  const workers = finding('child-processes');
  await expect(workers).toHaveCount(1, { timeout: 60000 });
  await expect(workers).toContainText('2 DataLoader workers');
  await expect(workers).toContainText('persistent_workers=True');
  await workers.getByRole('button', { name: /^Drop .*loader.*…$/ }).click();
  await expect(dialog).toContainText('loader');
  await dialog.getByRole('button', { name: 'Drop' }).click();
  // the workers are gone and reported gone (within 5 s of the cell)
  await expect(workers).toHaveCount(0, { timeout: 5000 });
  expect(noise).toEqual([]);
});

test('after a finished Ultralytics training: Drop the finished trainer, keep the model', async ({
  page
}) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);
  await page.notebook.createNew('trained.ipynb', { kernel: 'python3' });
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await openPanelFromGauge(page);
  await runNew(page, TRAINED);
  const owner = page
    .locator(panelId)
    .locator('.jp-GpuHygiene-finding[data-kind="owner-object"]');
  await expect(owner).toHaveCount(1, { timeout: 120000 });
  await expect(owner).toContainText('model.trainer');
  // one model: the trainer's copies are parts, no stacked-model toast
  await expect(page.locator(gauge)).toContainText('1 model');
  await expect(
    page.locator('.Toastify__toast').filter({ hasText: 'Stacked' })
  ).toHaveCount(0);
  const drop = owner.getByRole('button', {
    name: 'Drop the finished trainer, keep the model'
  });
  await drop.click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('model');
  await dialog.getByRole('button', { name: 'Drop trainer' }).click();
  // the receipt: what went, measured by the inventory the cell ended with
  const receipt = page
    .locator('.Toastify__toast')
    .filter({ hasText: 'Dropped the finished trainer of model' });
  await expect(receipt).toBeVisible({ timeout: 30000 });
  await expect(receipt).toContainText(
    /trained(\.ipynb)?: Dropped the finished trainer of model: what the holders keep went from [\d.]+ MiB to [\d.]+ MiB \(the next inventory\), [\d.]+ MiB freed\./
  );
  await expect(owner).toHaveCount(0, { timeout: 30000 });
  // the model still works
  await runNew(
    page,
    "pred = model.predict(np.zeros((64, 64, 3), 'uint8'), verbose=False)\n" +
      'print(type(model.trainer).__name__, len(pred))'
  );
  await expect(
    page.locator('.jp-OutputArea-output').filter({ hasText: 'NoneType 1' })
  ).toHaveCount(1);
  expect(noise).toEqual([]);
});

test('CUDA-only findings (synthetic inventory): shared bytes, fragmented cache, Move to CPU asks', async ({
  page
}) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);
  await page.notebook.createNew('synthetic-findings.ipynb', {
    kernel: 'python3'
  });
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  // a real variable of the synthetic root's name, for the inserted cell
  await runNew(page, 'import torch\nacts = [torch.ones(4) for _ in range(3)]');
  await openPanelFromGauge(page);
  await page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    const token = [...app.pluginRegistry._services.keys()].find(
      (t: any) => t.name === 'jupyterlab-gpu-hygiene:IGpuMonitor'
    );
    const monitor = await app.resolveRequiredService(token);
    await monitor.setSetting('sampleIntervalMs', 60000);
    await new Promise(resolve => setTimeout(resolve, 2500));
    const model = monitor.currentModel;
    model.resetKernelState();
    const MiB = 2 ** 20;
    const GiB = 2 ** 30;
    model.apply({
      protocol: 2,
      type: 'hello',
      agentVersion: 'synthetic',
      python: '3.11',
      pid: 1,
      torch: '2.5.1',
      nvml: true,
      nvmlError: null,
      devices: [
        {
          index: 0,
          nvmlIndex: 0,
          name: 'NVIDIA A10G',
          total: 24 * GiB,
          uuid: null
        }
      ]
    });
    model.apply({
      protocol: 2,
      type: 'inventory',
      t: Date.now() / 1000,
      seq: 1,
      executionCount: 2,
      durationMs: 5,
      skipped: false,
      torchImported: true,
      cudaInitialized: true,
      truncated: false,
      models: [],
      lastError: null,
      roots: [
        {
          kind: 'variable',
          name: 'acts',
          bytes: { 'cuda:0': 96 * MiB },
          sole: { 'cuda:0': 64 * MiB },
          shared: { 'cuda:0': 32 * MiB },
          sharedWith: ['last'],
          models: 0
        },
        {
          kind: 'variable',
          name: 'last',
          bytes: { 'cuda:0': 32 * MiB },
          sole: {},
          shared: { 'cuda:0': 32 * MiB },
          sharedWith: ['acts'],
          models: 0
        }
      ],
      unattributed: {},
      tensors: [],
      graphs: [],
      allocator: {
        expandableSegments: false,
        devices: [
          {
            index: 0,
            reserved: 1024 * MiB,
            allocated: 96 * MiB,
            active: 96 * MiB,
            inactiveSplit: 600 * MiB,
            releasable: 328 * MiB,
            segments: 12,
            allocRetries: 0
          }
        ]
      },
      children: {
        visible: true,
        source: 'proc',
        reason: null,
        truncated: false,
        processes: [],
        holders: []
      },
      owners: []
    });
  });
  const panel = page.locator(panelId);
  let tensors = panel.locator(
    '.jp-GpuHygiene-finding[data-kind="cuda-tensors"]'
  );
  await expect(tensors).toHaveCount(2);
  // `last` only shares what `acts` holds: listed, said to free nothing alone
  await expect(tensors.filter({ hasText: 'frees nothing' })).toContainText(
    'last'
  );
  tensors = tensors.filter({
    has: page.locator('.jp-GpuHygiene-findingSubject', { hasText: /^acts$/ })
  });
  await expect(tensors).toHaveCount(1);
  await expect(tensors.locator('.jp-GpuHygiene-findingBytes')).toHaveText(
    '64.0 MiB'
  );
  await expect(tensors.locator('.jp-GpuHygiene-findingShared')).toHaveText(
    '+ 32.0 MiB shared with last'
  );
  const fragmented = panel.locator(
    '.jp-GpuHygiene-finding[data-kind="fragmented-cache"]'
  );
  await expect(fragmented).toHaveCount(1);
  await expect(fragmented).toContainText('expandable_segments:True');

  await tensors.getByRole('button', { name: 'Move to CPU…' }).click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('keeps 64.0 MiB of VRAM, freed unless');
  await expect(dialog).toContainText('32.0 MiB more is shared with last');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toHaveCount(0);
  // cancelled: nothing inserted, nothing run
  expect(await insertedSources(page)).toEqual([]);
  await tensors.getByRole('button', { name: 'Move to CPU…' }).click();
  await dialog
    .getByRole('button', { name: 'Move to CPU', exact: true })
    .click();
  await expect
    .poll(async () => (await insertedSources(page)).join('\n'))
    .toContain('acts');
  // the inserted cell ran in the real kernel: `acts` is still there, a list
  await expect
    .poll(() =>
      page.evaluate(async () => {
        const app = (window as any).jupyterapp;
        const kernel = app.shell.currentWidget.sessionContext.session.kernel;
        const expression = 'repr([t.device.type for t in acts])';
        const reply = await kernel.requestExecute({
          code: '',
          silent: true,
          user_expressions: { r: expression }
        }).done;
        return reply.content.user_expressions.r.data?.['text/plain'];
      })
    )
    .toBe(`"['cpu', 'cpu', 'cpu']"`);
  await expect(
    page.locator('.jp-OutputArea-output[data-mime-type*="error"]')
  ).toHaveCount(0);
  expect(noise).toEqual([]);
});
