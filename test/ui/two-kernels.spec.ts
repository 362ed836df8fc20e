/**
 * Two notebooks on two kernels (issue 5): each kernel has its own model —
 * its own live models and its own cells — and the gauge and the VRAM panel
 * follow the active notebook. A console that shares the second notebook's
 * kernel runs a cell: the same agent reports it, and the second notebook's
 * figures update while the first one's stay as they were.
 */
import { expect, test } from '@jupyterlab/galata';
import { collectNoise, gaugeDetails, openPanelFromGauge } from './probes';
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { openNotebookOn, setCellSource } from './notebook-file';

test.use({ autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
const panel = '#jp-GpuHygiene-panel';

/** Id of the current notebook's kernel. */
function currentKernelId(page: IJupyterLabPageFixture): Promise<string> {
  return page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.sessionContext.session
        .kernel.id
  );
}

/** Execution counts of the rows of the panel's cells table, in ascending order. */
async function cellRows(page: IJupyterLabPageFixture): Promise<string[]> {
  const counts = await page
    .locator(`${panel} tr[data-execution-count]`)
    .evaluateAll(rows =>
      rows.map(r => r.getAttribute('data-execution-count')!)
    );
  return counts.sort();
}

test('two notebooks on two kernels: own models and cells; the gauge follows the active one', async ({
  page,
  tmpPath
}) => {
  const noise = collectNoise(page);

  await openNotebookOn(page, `${tmpPath}/first.ipynb`, 'python3');
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await setCellSource(page, 0, 'import torch');
  await page.notebook.runCell(0);
  await setCellSource(page, 1, 'a = torch.nn.Linear(8, 8)');
  await page.notebook.runCell(1);
  await expect(page.locator(gauge)).toHaveText(/^No GPU · 1 model · .+ RAM$/);
  await expect.poll(() => gaugeDetails(page)).toMatch(/in RAM: 288 B$/m);
  const first = await currentKernelId(page);

  await openNotebookOn(page, `${tmpPath}/second.ipynb`, 'python3');
  // A kernel of its own, not yet reporting any model.
  await expect(page.locator(gauge)).toHaveText(/^No GPU( · \S+ \S+ RAM)?$/, {
    timeout: 120000
  });
  const second = await currentKernelId(page);
  expect(second).not.toBe(first);
  await setCellSource(
    page,
    0,
    'import torch\nb = torch.nn.Linear(4, 4)\nc = torch.nn.Conv2d(1, 1, 1)'
  );
  await page.notebook.runCell(0);
  await expect(page.locator(gauge)).toContainText('No GPU · 2 models');

  // The panel shows the current notebook's kernel and its cells only.
  await openPanelFromGauge(page);
  await expect(page.locator(`${panel} .jp-GpuHygiene-panelKernel`)).toHaveText(
    'second.ipynb'
  );
  await expect.poll(() => cellRows(page)).toEqual(['1']);

  await page.notebook.activate('first.ipynb');
  await expect(page.locator(gauge)).toHaveText(/^No GPU · 1 model · .+ RAM$/);
  await expect.poll(() => gaugeDetails(page)).toMatch(/in RAM: 288 B$/m);
  await expect.poll(() => gaugeDetails(page)).toMatch(/Live models: 1\b/);
  await expect(page.locator(`${panel} .jp-GpuHygiene-panelKernel`)).toHaveText(
    'first.ipynb'
  );
  await expect.poll(() => cellRows(page)).toEqual(['1', '2']);

  // A console on the second notebook's kernel: one agent, both views.
  await page.notebook.activate('second.ipynb');
  await expect(page.locator(gauge)).toContainText('No GPU · 2 models');
  await page.evaluate(async () => {
    await (window as any).jupyterapp.commands.execute(
      'notebook:create-console'
    );
  });
  const prompt = page.locator(
    '.jp-CodeConsole-promptCell .jp-InputArea-editor .cm-content'
  );
  await prompt.waitFor();
  await expect
    .poll(() =>
      page.evaluate(
        () =>
          (window as any).jupyterapp.shell.currentWidget?.sessionContext
            ?.session?.kernel?.id
      )
    )
    .toBe(second);
  await prompt.click();
  await page.keyboard.type('d = torch.nn.GRU(2, 2)');
  await page.keyboard.press('Shift+Enter');
  // The gauge still follows the second notebook, whose kernel ran the cell.
  await expect(page.locator(gauge)).toContainText('No GPU · 3 models');
  await expect.poll(() => cellRows(page)).toEqual(['1', '2']);
  expect(
    await page.evaluate(
      () =>
        (window as any).jupyterapp.shell.currentWidget.sessionContext.session
          .kernel.id
    )
  ).toBe(second);

  await page.notebook.activate('first.ipynb');
  await expect(page.locator(gauge)).toHaveText(/^No GPU · 1 model · .+ RAM$/);
  await expect.poll(() => gaugeDetails(page)).toMatch(/in RAM: 288 B$/m);
  await expect.poll(() => cellRows(page)).toEqual(['1', '2']);
  expect(noise).toEqual([]);
});
