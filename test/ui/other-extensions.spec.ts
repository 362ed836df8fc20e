/**
 * Another extension's probes (issue 5): a variable inspector sends its own
 * execute requests to the notebook's kernel between the user's cells. They
 * are not cells: no row in the VRAM panel's cells table, and the next user
 * cell keeps its execution count.
 *
 * jupyterlab-variableInspector sends its set-up code with `silent: true` and
 * its query after every cell with `store_history: false` (not silent).
 */
import { expect, test } from '@jupyterlab/galata';
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { openNotebookOn } from './notebook-file';
import { openPanelFromGauge } from './probes';

test.use({ autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
const panel = '#jp-GpuHygiene-panel';
const PROBE =
  "import json\njson.dumps(sorted(k for k in globals() if not k.startswith('_')))";

/** Execution counts of the rows of the panel's cells table, ascending. */
async function cellRows(page: IJupyterLabPageFixture): Promise<string[]> {
  const counts = await page
    .locator(`${panel} tr[data-execution-count]`)
    .evaluateAll(rows =>
      rows.map(r => r.getAttribute('data-execution-count')!)
    );
  return counts.sort();
}

/** Send the probe on the notebook's kernel connection, as another extension does. */
function probe(page: IJupyterLabPageFixture, silent: boolean): Promise<string> {
  return page.evaluate(
    async ({ code, silent }) => {
      const kernel = (window as any).jupyterapp.shell.currentWidget
        .sessionContext.session.kernel;
      const future = kernel.requestExecute({
        code,
        silent,
        store_history: false,
        stop_on_error: false
      });
      const reply = await future.done;
      return reply.content.status;
    },
    { code: PROBE, silent }
  );
}

for (const silent of [true, false]) {
  test(`a probe with silent=${silent}, store_history=false is not a cell`, async ({
    page,
    tmpPath
  }) => {
    await openNotebookOn(page, `${tmpPath}/probed.ipynb`, 'python3', [
      'import torch\nnet = torch.nn.Linear(8, 8)',
      'x = 1'
    ]);
    await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
      timeout: 120000
    });
    await page.notebook.runCell(0);
    await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
    await openPanelFromGauge(page);
    await expect.poll(() => cellRows(page)).toEqual(['1']);

    for (let i = 0; i < 3; i++) {
      expect(await probe(page, silent)).toBe('ok');
    }
    // Anything the probes' hooks would send has arrived by now.
    await page.waitForTimeout(2000);
    expect(await cellRows(page)).toEqual(['1']);

    await page.notebook.runCell(1);
    const prompt = (await page.notebook.getCellLocator(1))!.locator(
      '.jp-InputPrompt'
    );
    await expect(prompt).toHaveText('[2]:');
    await expect.poll(() => cellRows(page)).toEqual(['1', '2']);
  });
}
