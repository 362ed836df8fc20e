/**
 * Browser test: a real JupyterLab server, a real ipykernel with torch and
 * Ultralytics on the CPU, the built extension, Debian chromium.
 *
 * Open the demo notebook, run the model cell twice, see the toast naming the
 * holder and the gauge, click Clean GPU in the toolbar, see the clean cell run
 * and one model left, restart the kernel and see the gauge come back.
 */
import { expect, test } from '@jupyterlab/galata';
import { collectNoise, gaugeDetails } from './probes';
import type { Page } from '@playwright/test';
import { execFileSync } from 'child_process';
import * as path from 'path';
import { cellSource } from './notebook-file';

// Galata's kernels fixture intercepts POST .../restart; a real restart needs it off.
test.use({ kernels: null, autoGoto: true });

const NOTEBOOK = 'stacked-yolo.ipynb';

/**
 * Record, in the page, when cell `index` finishes (its prompt leaves `[*]`)
 * and when the stacked-model toast appears (performance.now(), ms).
 */
async function watchCellEndAndToast(page: Page, index: number): Promise<void> {
  await page.evaluate(cellIndex => {
    const timing = { cellEnd: 0, toast: 0 };
    (window as any).__gpuHygieneTiming = timing;
    let sawBusy = false;
    const observer = new MutationObserver(() => {
      const now = performance.now();
      const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[
        cellIndex
      ];
      const prompt = cell?.querySelector('.jp-InputPrompt')?.textContent ?? '';
      if (prompt.includes('*')) {
        sawBusy = true;
      } else if (sawBusy && !timing.cellEnd) {
        timing.cellEnd = now;
      }
      if (
        !timing.toast &&
        [...document.querySelectorAll('.Toastify__toast')].some(t =>
          t.textContent?.includes('Stacked YOLO')
        )
      ) {
        timing.toast = now;
      }
      if (timing.cellEnd && timing.toast) {
        observer.disconnect();
      }
    });
    observer.observe(document.body, {
      childList: true,
      subtree: true,
      characterData: true
    });
  }, index);
}
/**
 * Whether the active notebook is modified once its kernel's info has arrived
 * (JupyterLab's handler of that info, which writes language_info, ran first:
 * it was attached when the kernel connected).
 */
async function notebookDirtyOnceKernelKnown(page: Page): Promise<boolean> {
  return page.evaluate(async () => {
    const panel = (window as any).jupyterapp.shell.currentWidget;
    await panel.sessionContext.ready;
    await panel.sessionContext.session.kernel.info;
    await new Promise(resolve => setTimeout(resolve, 0));
    return panel.context.model.dirty as boolean;
  });
}
const gauge = '.jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';

test.describe('stacked YOLO models', () => {
  test.beforeEach(async ({ page, tmpPath }, testInfo) => {
    // The copy make lab opens (scripts/demo_notebook.py, with the Python of
    // the kernel: make test-ui runs in .venv).
    const copy = testInfo.outputPath(NOTEBOOK);
    execFileSync('python', [
      path.resolve(__dirname, '../../scripts/demo_notebook.py'),
      path.resolve(__dirname, '../../examples', NOTEBOOK),
      copy
    ]);
    await page.contents.uploadFile(copy, `${tmpPath}/${NOTEBOOK}`);
    await page.notebook.openByPath(`${tmpPath}/${NOTEBOOK}`);
    await page.notebook.activate(NOTEBOOK);
  });

  test('warns, cleans and survives a restart', async ({ page }, testInfo) => {
    const noise = collectNoise(page);

    // The agent answers before any torch import: no GPU on this machine.
    await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
      timeout: 120000
    });
    // The demo opens unmodified (issue 29, item 7): JupyterLab writes the
    // kernel's language_info into the notebook once the kernel answers, and
    // neither that nor the extension marks it modified.
    expect(await notebookDirtyOnceKernelKnown(page)).toBe(false);

    await page.notebook.runCell(1); // imports
    await page.notebook.runCell(2); // model = YOLO(...); model.to(DEVICE)
    await expect(page.locator(gauge)).toContainText('1 model');
    await watchCellEndAndToast(page, 2);
    await page.notebook.runCell(2); // the re-run

    const warning = page.locator(toast, { hasText: 'Stacked YOLO' });
    await expect(warning).toBeVisible();
    const timing = await page.evaluate(
      () => (window as any).__gpuHygieneTiming
    );
    const latency = Math.round(timing.toast - timing.cellEnd);
    // A figure for the report, not a pass/fail criterion: local kernel vs Kernel Gateway.
    testInfo.annotations.push({
      type: 'cell end → toast (ms)',
      description: String(latency)
    });
    console.log(
      `cell end → toast: ${latency} ms (${testInfo.project.use.baseURL})`
    );
    await expect(warning).toContainText('held only by Out[2], _2, __');
    await expect(warning).toContainText('YOLO (yolov8n.yaml)');
    await warning.screenshot({
      path: testInfo.outputPath('stacked-yolo-toast.png')
    });
    await expect(page.locator(gauge)).toContainText('No GPU · 2 models');
    await page.screenshot({
      path: testInfo.outputPath('stacked-yolo-page.png')
    });
    await expect
      .poll(() => gaugeDetails(page))
      .toMatch(/Live models: 2 \(1 stale\)/);
    // the findings' rules are a chunk loaded with the first kernel: their
    // line is there once it arrived (the stale model, 12 MiB of RAM, is an
    // info on the one severity scale of issue 28)
    await expect
      .poll(() => gaugeDetails(page))
      .toMatch(/Findings: \d+ infos?$/m);

    const cellsBefore = await page.notebook.getCellCount();
    // The "freed" toast closes itself after 5 s, which a loaded machine can
    // spend on the polls below: it is looked for from the click on.
    const freed = expect(
      page.locator(toast, { hasText: 'Clean GPU freed' })
    ).toContainText('(2 → 1 live)', { timeout: 120000 });
    await page
      .locator('.jp-NotebookPanel-toolbar [data-command="gpu-hygiene:clean"]')
      .click();

    // The clean cell is inserted below the active cell and executed.
    await expect.poll(() => page.notebook.getCellCount()).toBe(cellsBefore + 1);
    // Shift+Enter moved to the markdown cell (index 3): the clean cell lands below it.
    const cleanIndex = 4;
    await expect
      .poll(async () => (await cellSource(page, cleanIndex)).split('\n')[0])
      .toBe('# gpu-hygiene: clear_gpu');
    const cleanCell = await page.notebook.getCellLocator(cleanIndex);
    await expect(cleanCell!.locator('.jp-InputPrompt')).toHaveText(/\[\d+\]:/);
    await freed;
    await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
    await expect(warning).toHaveCount(0);

    // The user's variable survived the clean.
    await page.notebook.addCell(
      'code',
      'print(type(model).__name__, model.task)'
    );
    const last = (await page.notebook.getCellCount()) - 1;
    await page.notebook.runCell(last);
    expect((await page.notebook.getCellTextOutput(last))?.join('')).toContain(
      'YOLO detect'
    );

    if (process.env.GPU_HYGIENE_GATEWAY) {
      // JupyterLab 4.6.6 + Kernel Gateway 3.0.1 lose the kernel connection after
      // restarting a kernel that imported torch (status "unknown", cells never
      // run) — reproduced with this extension disabled, so the restart step is
      // left to the local run.
      testInfo.annotations.push({
        type: 'not run through the gateway',
        description: 'kernel restart (upstream: the connection is lost)'
      });
      expect(noise).toEqual([]);
      return;
    }

    // Restart, after a confirmation that says what it frees and loses (no
    // VRAM promised: this kernel sees no GPU, issue 29); the agent is sent
    // again.
    await page.evaluate(() => {
      void (window as any).jupyterapp.commands.execute(
        'gpu-hygiene:restart-kernel'
      );
    });
    await expect(page.locator('.jp-Dialog')).toContainText(
      'frees all the memory of its process (it sees no GPU) and loses all variables'
    );
    await expect(page.locator('.jp-Dialog')).not.toContainText('VRAM');
    await page.locator('.jp-Dialog .jp-mod-accept').click();
    await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
      timeout: 60000
    });
    await expect(page.locator(gauge)).toHaveText(/^No GPU( · \S+ \S+ RAM)?$/);
    // Still alive after the restart: a new cell reports through the new agent.
    await page.notebook.runCell(1);
    await page.notebook.runCell(2);
    await expect(page.locator(gauge)).toContainText('No GPU · 1 model');

    // No console noise from the extension (errors, warnings or logs).
    expect(noise).toEqual([]);
  });

  test('Clean GPU and Restart are in the Kernel menu, the palette and the toolbar', async ({
    page
  }) => {
    await expect(
      page.locator(
        '.jp-NotebookPanel-toolbar [data-command="gpu-hygiene:clean"]'
      )
    ).toBeVisible();
    await page.menu.open('Kernel');
    expect(
      await page.menu.getMenuItemLocator('Kernel>Clean GPU')
    ).not.toBeNull();
    expect(
      await page.menu.getMenuItemLocator('Kernel>Restart Kernel to Free GPU…')
    ).not.toBeNull();
    await page.menu.closeAll();
    await page.keyboard.press('Control+Shift+C');
    await page.locator('#modal-command-palette input').fill('Clean GPU');
    await expect(
      page.locator('#modal-command-palette .lm-CommandPalette-item', {
        hasText: 'Clean GPU'
      })
    ).toBeVisible();
  });
});
