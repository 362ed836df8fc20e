/**
 * Smoke test of the page side, run by playwright.floor.config.js in each
 * supported page: JupyterLab 4.0.2 and Notebook 7.0.0 (the floor of
 * package.json's ranges and of pyproject.toml's `jupyterlab>=4.0.2`), and
 * the newest JupyterLab and Notebook 7 of .venv. The built extension is the
 * same wheel everywhere; the kernel is a real ipykernel with torch and
 * Ultralytics on the CPU; the browser is Debian chromium.
 *
 * One notebook, as a new user runs it: import, the model cell twice (the
 * stacked-YOLO toast names the old instance's holder), the Clean GPU button
 * of the notebook toolbar (the clean cell is inserted and run, the toast
 * says what it freed), the gauge's figures along the way. Nothing of the
 * extension may write an error to the console or throw in the page.
 */
import { expect, test as base, type Page } from '@playwright/test';

type App = 'lab' | 'notebook';

const test = base.extend<{ app: App; pageVersion: RegExp }>({
  // `jupyter lab` or `jupyter notebook` (Notebook 7)
  app: ['lab', { option: true }],
  // what `window.jupyterapp.version` must read: the page really is that release
  pageVersion: [/^\d+\.\d+\.\d+/, { option: true }]
});

const gauge = '.jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';
const cleanButton =
  '.jp-NotebookPanel-toolbar [data-command="gpu-hygiene:clean"]';

/** The demo's cells (examples/stacked-yolo.ipynb), as a notebook file. */
function notebook(): Record<string, unknown> {
  const code = (source: string) => ({
    cell_type: 'code',
    execution_count: null,
    metadata: {},
    outputs: [],
    source
  });
  return {
    cells: [
      code('import torch\nfrom ultralytics import YOLO'),
      code('model = YOLO("yolov8n.yaml")\nmodel.to("cpu")')
    ],
    metadata: {
      kernelspec: {
        display_name: 'Python 3 (ipykernel)',
        language: 'python',
        name: 'python3'
      },
      language_info: { name: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/** The open notebook's cells (its panel is the shell's current widget). */
function cellCount(page: Page): Promise<number> {
  return page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget?.content?.widgets
        ?.length ?? 0
  );
}

/** Run cell `index` of the open notebook, as Shift+Enter does. */
async function runCell(page: Page, index: number): Promise<void> {
  await page.evaluate(async cellIndex => {
    const app = (window as any).jupyterapp;
    app.shell.currentWidget.content.activeCellIndex = cellIndex;
    await app.commands.execute('notebook:run-cell-and-select-next');
  }, index);
}

/** The first line of cell `index`'s input. */
function firstLine(page: Page, index: number): Promise<string> {
  return page.evaluate(
    cellIndex =>
      (window as any).jupyterapp.shell.currentWidget.content.widgets[
        cellIndex
      ].model.sharedModel
        .getSource()
        .split('\n')[0],
    index
  );
}

test('open a notebook, stacked-YOLO toast, Clean GPU, gauge', async ({
  page,
  request,
  app,
  pageVersion
}, testInfo) => {
  const noise: string[] = [];
  // The extension's own errors. (The module federation's "Unsatisfied
  // version" warnings name no consumer, and JupyterLab 4.0.2's own bundle
  // prints some: test_floor.py checks what the built extension requires.)
  page.on('console', message => {
    const text = message.text();
    if (/gpu.hygiene|gpu_hygiene/i.test(text) && message.type() === 'error') {
      noise.push(`console: ${text}`);
    }
  });
  page.on('pageerror', error => {
    if (/gpu.hygiene|gpu_hygiene/i.test(`${error.message}\n${error.stack}`)) {
      noise.push(`pageerror: ${error.message}`);
    }
  });

  const name = `smoke-${testInfo.project.name}.ipynb`;
  const saved = await request.put(`/api/contents/${name}`, {
    data: { type: 'notebook', format: 'json', content: notebook() }
  });
  expect(saved.ok()).toBe(true);
  // The page and its version, as the server reports them.
  await page.goto(app === 'lab' ? `/lab/tree/${name}` : `/notebooks/${name}`);
  await page.waitForFunction(() => (window as any).jupyterapp?.version);
  const version = await page.evaluate(() => (window as any).jupyterapp.version);
  testInfo.annotations.push({ type: 'page', description: `${app} ${version}` });
  expect(version).toMatch(pageVersion);

  // The gauge of a CPU-only kernel, once the agent said hello.
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  // "No GPU", then the kernel's resident RAM once sampled
  await expect(page.locator(gauge)).toHaveText(/^No GPU( · \S+ \S+ RAM)?$/);
  // Notebook 7.0.0's reactive toolbar can measure itself before the page has
  // its width on a loaded machine and put every item, its own too, under
  // "More commands" (seen once in a fresh clone's make test, beside Galata):
  // a resize makes it measure again. Nothing of this extension is involved.
  const clean = page.locator(cleanButton);
  try {
    await expect(clean).toBeVisible({ timeout: 20000 });
  } catch {
    const size = page.viewportSize()!;
    await page.setViewportSize({ width: size.width - 40, height: size.height });
    await page.setViewportSize(size);
  }
  await expect(clean).toBeVisible();
  await expect.poll(() => cellCount(page)).toBe(2);

  await runCell(page, 0);
  await runCell(page, 1);
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
  await runCell(page, 1); // the re-run: the first instance is kept by Out[2]
  const warning = page.locator(toast, { hasText: 'Stacked YOLO' });
  await expect(warning).toBeVisible();
  await expect(warning).toContainText('held only by Out[2], _2, __');
  await expect(page.locator(gauge)).toContainText('No GPU · 2 models');
  await page.screenshot({ path: testInfo.outputPath('stacked.png') });

  const before = await cellCount(page);
  await page.locator(cleanButton).click();
  await expect.poll(() => cellCount(page)).toBe(before + 1);
  const freed = page.locator(toast, { hasText: 'Clean GPU freed' });
  await expect(freed).toBeVisible();
  await expect(freed).toContainText('(2 → 1 live)');
  const cleanCell = await page.evaluate(() => {
    const cells = (window as any).jupyterapp.shell.currentWidget.content
      .widgets;
    return cells.findIndex((cell: any) =>
      cell.model.sharedModel.getSource().startsWith('# gpu-hygiene: clear_gpu')
    );
  });
  expect(cleanCell).toBeGreaterThan(-1);
  expect(await firstLine(page, cleanCell)).toBe('# gpu-hygiene: clear_gpu');
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
  await expect(warning).toHaveCount(0);
  await page.screenshot({ path: testInfo.outputPath('cleaned.png') });

  expect(noise).toEqual([]);
});
