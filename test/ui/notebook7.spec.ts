/**
 * Jupyter Notebook 7 (the `notebook` package, built on JupyterLab 4), run by
 * playwright.notebook7.config.js: the same built extension in a
 * `jupyter notebook` server, a real ipykernel with torch and Ultralytics on
 * the CPU, Debian chromium.
 *
 * Notebook 7 has no status bar: the gauge sits in its menu bar, beside its
 * kernel status. The demo notebook's model cell runs twice: the stacked-model
 * toast names the holder; the Clean GPU button of the notebook toolbar
 * inserts and runs the clean cell, and the toast says what it freed.
 */
import { expect, test } from '@jupyterlab/galata';
import type { Page } from '@playwright/test';
import * as path from 'path';

// Notebook 7 is ready once its main panel is there (jupyter/notebook's ui-tests).
test.use({
  autoGoto: true,
  waitForApplication: async ({ baseURL }, use) => {
    await use(async (page: Page) => {
      await page.waitForSelector('#main-panel');
    });
  }
});

const NOTEBOOK = 'stacked-yolo.ipynb';
const gauge = '#menu-panel .jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';
const cleanButton =
  '.jp-NotebookPanel-toolbar [data-command="gpu-hygiene:clean"]';

/** Run cell `index` of the notebook and select the next one (Shift+Enter). */
async function runCell(page: Page, index: number): Promise<void> {
  await page.evaluate(async cellIndex => {
    const app = (window as any).jupyterapp;
    app.shell.currentWidget.content.activeCellIndex = cellIndex;
    await app.commands.execute('notebook:run-cell-and-select-next');
  }, index);
}

/** Text of cell `index`'s input. */
function cellSource(page: Page, index: number): Promise<string> {
  return page.evaluate(
    cellIndex =>
      (window as any).jupyterapp.shell.currentWidget.content.widgets[
        cellIndex
      ].model.sharedModel.getSource(),
    index
  );
}

test('Notebook 7: gauge in the menu bar, toolbar button, stacked-model toast and Clean GPU', async ({
  page,
  tmpPath
}, testInfo) => {
  const noise: string[] = [];
  page.on('console', message => {
    const text = message.text();
    if (/gpu.hygiene|gpu_hygiene/i.test(text) && message.type() !== 'debug') {
      noise.push(`${message.type()}: ${text}`);
    }
  });
  // Notebook 7.6.5's own shortcuts plugin throws "Cannot read properties of
  // undefined (reading 'schema')" at start, with this extension disabled too:
  // only errors from the extension's code count.
  page.on('pageerror', error => {
    if (/gpu.hygiene|gpu_hygiene/i.test(`${error.message}\n${error.stack}`)) {
      noise.push(`pageerror: ${error.message}`);
    }
  });

  // The file browser page: no notebook, no gauge.
  await expect(page.locator('#menu-panel')).toBeVisible();
  await expect(page.locator(gauge)).toHaveCount(0);

  await page.contents.uploadFile(
    path.resolve(__dirname, '../../examples', NOTEBOOK),
    `${tmpPath}/${NOTEBOOK}`
  );
  await page.goto(`notebooks/${tmpPath}/${NOTEBOOK}`);
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await expect(page.locator(gauge)).toHaveText(/^No GPU( · \S+ \S+ RAM)?$/);
  await expect(page.locator(cleanButton)).toBeVisible();

  await runCell(page, 1); // imports
  await runCell(page, 2); // model = YOLO(...)
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
  await runCell(page, 2); // the re-run

  const warning = page.locator(toast, { hasText: 'Stacked YOLO' });
  await expect(warning).toBeVisible();
  await expect(warning).toContainText('held only by Out[2], _2, __');
  await expect(page.locator(gauge)).toContainText('No GPU · 2 models');
  await page.screenshot({ path: testInfo.outputPath('notebook7-page.png') });

  const cellsBefore = await page.evaluate(
    () => (window as any).jupyterapp.shell.currentWidget.content.widgets.length
  );
  await page.locator(cleanButton).click();
  // Inserted below the active cell (the markdown cell after the model cell) and run.
  const cleanIndex = 4;
  await expect
    .poll(() =>
      page.evaluate(
        () =>
          (window as any).jupyterapp.shell.currentWidget.content.widgets.length
      )
    )
    .toBe(cellsBefore + 1);
  await expect
    .poll(async () => (await cellSource(page, cleanIndex)).split('\n')[0])
    .toBe('# gpu-hygiene: clear_gpu');
  await expect(
    page
      .locator('.jp-Notebook .jp-Cell')
      .nth(cleanIndex)
      .locator('.jp-InputPrompt')
  ).toHaveText(/\[\d+\]:/);
  const freed = page.locator(toast, { hasText: 'Clean GPU freed' });
  await expect(freed).toBeVisible();
  await expect(freed).toContainText('(2 → 1 live)');
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
  await expect(warning).toHaveCount(0);
  await page.screenshot({
    path: testInfo.outputPath('notebook7-after-clean.png')
  });

  // The commands are in Notebook 7's Kernel menu too.
  await page.menu.open('Kernel');
  expect(await page.menu.getMenuItemLocator('Kernel>Clean GPU')).not.toBeNull();
  expect(
    await page.menu.getMenuItemLocator('Kernel>Restart Kernel to Free GPU…')
  ).not.toBeNull();
  await page.menu.closeAll();

  // A click on the gauge opens the VRAM panel in Notebook 7's right side panel.
  await page.locator(gauge).click();
  await expect(
    page.locator('#jp-right-stack #jp-GpuHygiene-panel')
  ).toBeVisible();
  await expect(
    page.locator('#jp-GpuHygiene-panel tr[data-execution-count]').first()
  ).toBeVisible();
  await page.screenshot({
    path: testInfo.outputPath('notebook7-panel.png')
  });

  expect(noise).toEqual([]);
});
