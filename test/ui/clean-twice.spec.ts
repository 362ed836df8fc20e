/**
 * Browser test (the issue's "also fix"): a real JupyterLab server, a real
 * ipykernel with torch on the CPU, the built extension, Debian chromium.
 *
 * Clean GPU twice leaves one clean cell, in the first one's place, holding
 * the second run (its source is the second plan, its prompt the second
 * execution count, its output that run's: none); one Undo brings the first
 * cell back; a Clean GPU with another cell active replaces that cell from
 * elsewhere and says so in a toast. (The page is served from 127.0.0.1, a
 * secure context, so crypto.subtle is there for the cells' fingerprints.)
 */
import { expect, test } from '@jupyterlab/galata';
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { cellSource, openNotebookOn, setCellSource } from './notebook-file';
import { collectNoise } from './probes';

test.use({ autoGoto: true });

const CLEAN = '.jp-NotebookPanel-toolbar [data-command="gpu-hygiene:clean"]';
const MARKER = '# gpu-hygiene: clear_gpu';
const gauge = '.jp-GpuHygiene-gauge';
const freed = '.Toastify__toast';

/** Indices of the cells whose source starts with the clean cell's marker. */
async function cleanCells(page: IJupyterLabPageFixture): Promise<number[]> {
  const found: number[] = [];
  const count = await page.notebook.getCellCount();
  for (let i = 0; i < count; i++) {
    if ((await cellSource(page, i)).startsWith(MARKER)) {
      found.push(i);
    }
  }
  return found;
}

/** The execution count in cell `index`'s prompt (`[7]:`), or null (`[ ]:`, `[*]:`). */
async function executionCount(
  page: IJupyterLabPageFixture,
  index: number
): Promise<number | null> {
  const cell = await page.notebook.getCellLocator(index);
  const prompt = (await cell?.locator('.jp-InputPrompt').textContent()) ?? '';
  const match = /\[(\d+)\]/.exec(prompt);
  return match ? Number(match[1]) : null;
}

/**
 * Click Clean GPU and wait for its "freed" toast (the agent's `cleaned`, after
 * the inventory); with `also`, for that toast too, looked for from the click
 * on (the "Replaced…" toast closes itself after 5 s, which a loaded machine
 * can spend running the cell before "freed" comes).
 */
async function cleanAndWait(
  page: IJupyterLabPageFixture,
  also?: string
): Promise<void> {
  // one "freed" toast per kernel, updated in place: close the previous one
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('apputils:dismiss-notification')
  );
  await expect(page.locator(freed, { hasText: 'Clean GPU freed' })).toHaveCount(
    0
  );
  await page.locator(CLEAN).click();
  await Promise.all([
    expect(page.locator(freed, { hasText: 'Clean GPU freed' })).toBeVisible(),
    ...(also
      ? [expect(page.locator(freed, { hasText: also })).toBeVisible()]
      : [])
  ]);
}

test('Clean GPU twice leaves one clean cell, with the second run', async ({
  page,
  tmpPath
}) => {
  const noise = collectNoise(page);
  await openNotebookOn(page, `${tmpPath}/clean-twice.ipynb`, 'python3', [
    'import torch',
    'torch.nn.Linear(256, 256)', // shown: held only by the output cache
    'x = 1'
  ]);
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await page.notebook.runCell(0);
  await page.notebook.runCell(1); // Shift+Enter: the active cell is now 2
  await expect(page.locator(gauge)).toContainText('1 model');

  // The first Clean GPU: inserted below the active cell (2), run.
  await cleanAndWait(page);
  expect(await page.notebook.getCellCount()).toBe(4);
  expect(await cleanCells(page)).toEqual([3]);
  await expect.poll(() => executionCount(page, 3)).not.toBeNull();
  const first = {
    source: await cellSource(page, 3),
    count: (await executionCount(page, 3))!
  };
  expect(first.source).toContain('Frees Linear');

  // The second Clean GPU (the clean cell is the active one): it replaces it.
  await cleanAndWait(page);
  await expect.poll(() => executionCount(page, 3)).toBeGreaterThan(first.count);
  expect(await page.notebook.getCellCount()).toBe(4);
  expect(await cleanCells(page)).toEqual([3]);
  const second = await cellSource(page, 3);
  expect(second).not.toBe(first.source);
  // the comment paragraph wraps at 79 columns
  expect(second).toMatch(/Output cache:\s*(?:#\s*)?nothing to drop\./);
  expect(second).not.toContain('Frees Linear');
  // the clean cell ends with `del`: the second run shows no output either
  expect(await page.notebook.getCellTextOutput(3)).toBeNull();
  await expect(
    page.locator(freed, { hasText: 'Replaced the earlier' })
  ).toHaveCount(0); // in place: nothing to say

  // One Undo (Z in command mode) brings the first clean cell back.
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('notebook:undo-cell-action')
  );
  await expect.poll(() => cellSource(page, 3)).toBe(first.source);
  expect(await cleanCells(page)).toEqual([3]);
  expect(await executionCount(page, 3)).toBe(first.count);

  // Clean GPU with the first cell active: the unedited clean cell further
  // down goes, the new one lands below cell 0, and a toast says so.
  await page.notebook.selectCells(0);
  await cleanAndWait(page, 'Replaced the earlier, unedited cell');
  expect(await page.notebook.getCellCount()).toBe(4);
  expect(await cleanCells(page)).toEqual([1]);

  // A clean cell the user edited stays: the next Clean GPU adds one.
  await setCellSource(page, 1, `${second}print("mine")\n`);
  await page.notebook.selectCells(1);
  await cleanAndWait(page);
  expect(await cleanCells(page)).toEqual([1, 2]);

  expect(noise).toEqual([]);
});
