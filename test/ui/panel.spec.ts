/**
 * Browser test of the VRAM panel: a real JupyterLab server, a real ipykernel
 * with torch and Ultralytics on the CPU, the built extension, Debian chromium.
 *
 * JupyterLab starts without the panel's chunk (recharts), the agent's chunk
 * (its Python text and the message validator) and the toasts' chunk; the
 * last two load when the notebook's kernel connects, and a click on the
 * status bar gauge opens the panel and loads it. After the model cell ran
 * twice, the older YOLO is a stale holder: "Free" inserts and runs a clean
 * cell for that model only, and its row leaves the table. Screenshots of the
 * panel in the light and dark themes are kept as test artifacts.
 */
import { expect, test } from '@jupyterlab/galata';
import { collectNoise, openPanelFromGauge } from './probes';
import * as fs from 'fs';
import * as path from 'path';
import { cellSource } from './notebook-file';

test.use({ autoGoto: false });

const NOTEBOOK = 'stacked-yolo.ipynb';
const STATIC = '/lab/extensions/jupyterlab-gpu-hygiene/static/';

/**
 * The served build's static folder: the first jupyterlab-gpu-hygiene on
 * JUPYTER_PATH (JupyterLab serves that one), else the one installed in .venv.
 */
function staticDir(): string {
  const served = (process.env.JUPYTER_PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .map(dir => path.join(dir, 'labextensions/jupyterlab-gpu-hygiene/static'))
    .find(dir => fs.existsSync(dir));
  return (
    served ??
    path.resolve(
      __dirname,
      '../../.venv/share/jupyter/labextensions/jupyterlab-gpu-hygiene/static'
    )
  );
}

/** The served build's chunk whose text holds `marker`. */
function chunkHolding(marker: string): string {
  const dir = staticDir();
  const file = fs
    .readdirSync(dir)
    .filter(name => name.endsWith('.js'))
    .find(name =>
      fs.readFileSync(path.join(dir, name), 'utf8').includes(marker)
    );
  if (!file) {
    throw new Error(`no chunk holding ${JSON.stringify(marker)} in ${dir}`);
  }
  return file;
}

/** The chunk that holds recharts (the one with its line class name). */
const rechartsChunk = () => chunkHolding('recharts-line');
/** The agent's chunk: its package name is in the agent's Python text. */
const agentChunk = () => chunkHolding('_jupyterlab_gpu_hygiene_agent');
/** The toasts' chunk (src/notifications/, its buttons' label). */
const toastsChunk = () => chunkHolding("Don't warn again");

test('VRAM panel: lazy, opened from the gauge, frees a stale holder', async ({
  page,
  tmpPath
}, testInfo) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);
  const chunks: string[] = [];
  page.on('request', request => {
    const url = new URL(request.url());
    if (url.pathname.includes(STATIC)) {
      chunks.push(path.basename(url.pathname));
    }
  });

  await page.goto();
  // JupyterLab started without the agent's chunk and the toasts' chunk.
  const agent = agentChunk();
  const toasts = toastsChunk();
  expect(chunks.some(name => name.startsWith('remoteEntry'))).toBe(true);
  expect(chunks).not.toContain(agent);
  expect(chunks).not.toContain(toasts);
  await page.contents.uploadFile(
    path.resolve(__dirname, '../../examples', NOTEBOOK),
    `${tmpPath}/${NOTEBOOK}`
  );
  await page.notebook.openByPath(`${tmpPath}/${NOTEBOOK}`);
  await page.notebook.activate(NOTEBOOK);
  const gauge = page.locator('.jp-GpuHygiene-gauge');
  await expect(gauge).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });

  // The kernel's agent answered: its chunk and the toasts' chunk loaded with
  // it, not the panel's recharts chunk.
  const recharts = rechartsChunk();
  expect(chunks).toContain(agent);
  expect(chunks).toContain(toasts);
  expect(chunks).not.toContain(recharts);
  const atStartup = chunks.length;

  await page.notebook.runCell(1); // imports
  await page.notebook.runCell(2); // model = YOLO(...); model.to(DEVICE)
  await expect(gauge).toContainText('1 model');
  await page.notebook.runCell(2); // the re-run: the first YOLO is now stale
  await expect(gauge).toContainText('2 models');

  // Open the panel from the gauge's popup; its chunks load now.
  await expect(gauge).toHaveAttribute(
    'title',
    'GPU memory — click for details'
  );
  await openPanelFromGauge(page);
  const panel = page.locator('#jp-GpuHygiene-panel');
  await expect(panel.locator('.jp-GpuHygiene-panelContent')).toBeVisible();
  await expect.poll(() => chunks.includes(recharts)).toBe(true);
  expect(chunks.length).toBeGreaterThan(atStartup);

  // This machine has no GPU (no NVIDIA driver): the panel says so plainly,
  // without advice to install nvidia-ml-py (it is installed), and still
  // lists who holds memory and the cells.
  await expect(panel).toContainText('No GPU visible to this kernel.');
  await expect(panel).toContainText('No NVIDIA driver was found');
  await expect(panel).not.toContainText('pip install nvidia-ml-py');
  await expect(panel).toContainText('Who holds memory');
  await expect(panel.locator('.jp-GpuHygiene-trend')).toHaveAttribute(
    'data-verdict',
    'no-gpu'
  );
  const holders = panel.locator('.jp-GpuHygiene-holders tbody tr');
  await expect(holders).toHaveCount(2);
  const stale = panel.locator(
    '.jp-GpuHygiene-holders tbody tr[data-state="stale"]'
  );
  await expect(stale).toHaveCount(1);
  await expect(stale).toContainText('Out[2], _2, __');
  await expect(
    panel.locator('.jp-GpuHygiene-holders tr[data-state="named"]')
  ).toContainText('model');
  await expect(
    panel.locator('.jp-GpuHygiene-cells tbody tr[data-execution-count="3"]')
  ).toContainText('YOLO (yolov8n.yaml)');

  // Close the stacked-model toast so that it does not cover the panel.
  await page
    .locator('.Toastify__toast', { hasText: 'Stacked YOLO' })
    .getByRole('button', { name: 'Hide notification' })
    .click();
  await expect(page.locator('.Toastify__toast')).toHaveCount(0);
  await panel.screenshot({ path: testInfo.outputPath('vram-panel-light.png') });
  await page.theme.setDarkTheme();
  await expect(panel.locator('.jp-GpuHygiene-panelContent')).toBeVisible();
  await panel.screenshot({ path: testInfo.outputPath('vram-panel-dark.png') });
  await page.screenshot({ path: testInfo.outputPath('vram-page-dark.png') });

  // "Free" on the stale holder: a clean cell for that model only, run.
  const cellsBefore = await page.notebook.getCellCount();
  await stale.locator('[data-action="free"]').click();
  await expect.poll(() => page.notebook.getCellCount()).toBe(cellsBefore + 1);
  await expect(stale).toHaveCount(0);
  await expect(holders).toHaveCount(1);
  await expect(holders.first()).toHaveAttribute('data-state', 'named');
  await expect(gauge).toContainText('No GPU · 1 model');
  await expect(
    page.locator('.Toastify__toast', { hasText: 'Clean GPU freed' })
  ).toContainText('(2 → 1 live)');
  const source = (await cellSource(page, 4)).split('\n');
  expect(source[0]).toBe('# gpu-hygiene: clear_gpu');
  expect(source.join('\n')).toContain('keeps one stale model alive');

  expect(noise).toEqual([]);
});

test('the VRAM panel is in the View menu and the palette', async ({ page }) => {
  await page.goto();
  await page.menu.open('View');
  expect(await page.menu.getMenuItemLocator('View>VRAM Panel')).not.toBeNull();
  await page.menu.closeAll();
  await page.keyboard.press('Control+Shift+C');
  await page.locator('#modal-command-palette input').fill('VRAM Panel');
  const item = page.locator('#modal-command-palette .lm-CommandPalette-item', {
    hasText: 'VRAM Panel'
  });
  await expect(item).toBeVisible();
  await item.click();
  await expect(page.locator('#jp-GpuHygiene-panel')).toContainText(
    'Open a notebook with a Python kernel'
  );
});

/**
 * This machine has no GPU, so the chart is drawn from a synthetic GPU series
 * put into the current kernel's model (the agent is slowed down first so
 * that its own samples do not interleave): a model load in cell [2], then
 * four training cells that each keep ~300 MiB. Checks the chart in a
 * real browser (layout, theme colours, hover values) and the leak verdict.
 */
test('the chart in light and dark themes (synthetic GPU series)', async ({
  page,
  tmpPath
}, testInfo) => {
  const noise: string[] = [];
  page.on('console', message => {
    if (/gpu.hygiene|recharts/i.test(message.text())) {
      noise.push(`${message.type()}: ${message.text()}`);
    }
  });
  page.on('pageerror', error => noise.push(`pageerror: ${error.message}`));
  await page.goto();
  await page.notebook.createNew('synthetic.ipynb', { kernel: 'python3' });
  const gauge = page.locator('.jp-GpuHygiene-gauge');
  await expect(gauge).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });

  await page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    const token = [...app.pluginRegistry._services.keys()].find(
      (t: any) => t.name === 'jupyterlab-gpu-hygiene:IGpuMonitor'
    );
    const monitor = await app.resolveRequiredService(token);
    await monitor.setSetting('sampleIntervalMs', 60000);
    // Let a sample already under way arrive before the model is reset.
    await new Promise(resolve => setTimeout(resolve, 2500));
    const model = monitor.currentModel;
    model.resetKernelState();
    const MiB = 2 ** 20;
    const GiB = 2 ** 30;
    const total = 24 * GiB;
    const t0 = Date.now() / 1000 - 600;
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
        { index: 0, nvmlIndex: 0, name: 'NVIDIA A10G', total, uuid: null }
      ]
    });
    // [start, end) seconds of each cell, and allocated after it (MiB).
    const cells = [
      [20, 24, 0], // [1] imports
      [60, 75, 6200], // [2] model load
      [120, 200, 6500],
      [230, 310, 6800],
      [340, 420, 7100],
      [450, 530, 7400]
    ];
    const yolo = (id: string, order: number) => ({
      id,
      order,
      className: 'YOLO',
      module: 'ultralytics.models.yolo.model',
      family: 'ultralytics',
      label: 'YOLO (yolov8x.pt)',
      parameters: 68_200_000,
      bytes: { 'cuda:0': 273 * MiB },
      parts: [],
      holders: [{ kind: 'variable', name: 'model', path: 'model' }],
      stale: false
    });
    let allocated = 0;
    let seq = 0;
    let cell = 0;
    for (let s = 0; s < 600; s++) {
      const current = cells[cell];
      const busy = !!current && s >= current[0] && s < current[1];
      if (busy) {
        // A training step's activations: a sawtooth above what stays.
        const base = cell === 0 ? 0 : (cells[cell - 1][2] as number) * MiB;
        const progress = (s - current[0]) / (current[1] - current[0]);
        allocated =
          base +
          progress * ((current[2] as number) * MiB - base) +
          (cell >= 2 ? ((s % 7) / 7) * 3 * GiB : 0);
      } else if (current && s >= current[1]) {
        allocated = (current[2] as number) * MiB;
        model.apply({
          protocol: 2,
          type: 'inventory',
          t: t0 + current[1],
          seq: cell + 1,
          executionCount: cell + 1,
          durationMs: 5,
          skipped: false,
          torchImported: true,
          cudaInitialized: cell >= 1,
          truncated: false,
          models: cell >= 1 ? [yolo('0x1', 1)] : [],
          lastError: null,
          roots: [],
          unattributed: {},
          tensors: [],
          graphs: []
        });
        cell++;
      }
      const reserved =
        allocated === 0
          ? 0
          : Math.ceil((allocated + GiB) / (2 * GiB)) * 2 * GiB;
      const process = allocated === 0 ? 0 : reserved + 620 * MiB;
      model.apply({
        protocol: 2,
        type: 'sample',
        t: t0 + s,
        seq: ++seq,
        busy,
        devices: [
          {
            index: 0,
            used: process + 1.5 * GiB,
            total,
            process,
            allocated: allocated === 0 ? null : Math.round(allocated),
            reserved: allocated === 0 ? null : reserved,
            cached: allocated === 0 ? null : reserved - Math.round(allocated),
            nonTorch: allocated === 0 ? null : process - reserved,
            processHidden: false
          }
        ]
      });
    }
  });

  await openPanelFromGauge(page);
  const panel = page.locator('#jp-GpuHygiene-panel');
  const chart = panel.locator('.jp-GpuHygiene-chart');
  await expect(chart).toBeVisible();
  expect(Number(await chart.getAttribute('data-points'))).toBeLessThanOrEqual(
    500
  );
  // used, process, reserved, allocated, cached, CUDA context and libraries
  await expect(panel.locator('.recharts-line')).toHaveCount(6);
  await expect(panel.locator('.jp-GpuHygiene-totalLine')).toHaveCount(1);
  await expect(panel.locator('.jp-GpuHygiene-cellMarker')).toHaveCount(6);
  // Cells [3]..[6] each kept ~300 MiB: the trend says so, and a toast too.
  await expect(panel.locator('.jp-GpuHygiene-trend')).toHaveAttribute(
    'data-verdict',
    'rising'
  );
  await expect(panel.locator('.jp-GpuHygiene-trend')).toContainText('per cell');
  await expect(
    panel.locator('.jp-GpuHygiene-cells tr[data-execution-count="4"]')
  ).toContainText('+300.0 MiB');
  const leak = page.locator('.Toastify__toast', {
    hasText: 'PyTorch allocated climbs ~300.0 MiB per cell over 5 cells'
  });
  await expect(leak).toBeVisible();
  await leak.getByRole('button', { name: 'Hide notification' }).click();

  await expect(leak).toHaveCount(0);
  // The 600 synthetic samples arrive in one burst: each training cell's own
  // in-cell climb raised its toast, dismissed when the next cell started,
  // within the same tick; react-toastify keeps those it had not drawn yet.
  // They are not what this test looks at (the chart): keep them out of the
  // way of its clicks and screenshots.
  await page.addStyleTag({
    content: '.jp-toastContainer { visibility: hidden !important; }'
  });
  await panel.screenshot({
    path: testInfo.outputPath('vram-chart-light.png')
  });
  await page.theme.setDarkTheme();
  await panel.locator('.jp-GpuHygiene-chartTools input').check();
  await panel.screenshot({ path: testInfo.outputPath('vram-chart-dark.png') });
  // Hover: values in MiB/GiB.
  const box = (await panel.locator('.recharts-surface').boundingBox())!;
  await page.mouse.move(box.x + box.width * 0.75, box.y + box.height * 0.8);
  await expect(panel.locator('.jp-GpuHygiene-tooltip')).toContainText(
    'PyTorch allocated'
  );
  await expect(panel.locator('.jp-GpuHygiene-tooltip')).toContainText('GiB');
  await panel.screenshot({
    path: testInfo.outputPath('vram-chart-dark-hover.png')
  });
  await page.screenshot({ path: testInfo.outputPath('vram-chart-page.png') });
  expect(noise).toEqual([]);
});
