/**
 * Browser test of "Live CUDA memory by origin" (issue 24) on a real
 * JupyterLab server, a real ipykernel with torch on the CPU, the built
 * extension and Debian chromium: the Kernel menu's Record Allocation Origins
 * turns the `recordOrigins` setting on, the kernel's agent waits for the
 * first CUDA use (none here) and says so in the panel; then, because this
 * machine has no GPU, a cell runs the stand-in of PyTorch's CUDA recorder
 * (`test/agent/fake_cuda_history.py`: `torch.cuda.is_initialized`,
 * `_record_memory_history` and `_snapshot` over the kernel's real CPU
 * storages, said in that cell) and the panel lists the live memory by the
 * real cells and lines that made it; a link selects that cell; the panel's
 * toggle turns recording off again.
 */
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';
import { collectNoise, openPanelFromGauge, runNew } from './probes';

test.use({ autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
const panelId = '#jp-GpuHygiene-panel';
const FAKE = fs.readFileSync(
  path.join(__dirname, '..', 'agent', 'fake_cuda_history.py'),
  'utf-8'
);

test('record origins from the Kernel menu, list them by cell and line, jump, turn off', async ({
  page
}) => {
  const noise = collectNoise(page, /gpu.hygiene|gpu_hygiene|recharts/i);
  await page.notebook.createNew('origins.ipynb', { kernel: 'python3' });
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await openPanelFromGauge(page);
  const panel = page.locator(panelId);
  const section = panel.locator('.jp-GpuHygiene-origins');
  await runNew(page, 'import torch');
  // no GPU and not asked for: no section
  await expect(section).toHaveCount(0);

  await page.menu.clickMenuItem('Kernel>Record Allocation Origins');
  await expect(section).toHaveAttribute('data-state', 'waiting');
  await expect(section).toContainText(
    'Recording starts after this kernel’s first cell that uses CUDA.'
  );
  await expect(section.locator('[data-action="record-origins"]')).toBeChecked();

  // what cannot exist here: CUDA; the stand-in records the real cells' stacks
  await runNew(
    page,
    '# test stand-in for PyTorch CUDA recorder (no GPU on this machine)\n' +
      `exec(compile(${JSON.stringify(FAKE)}, '<fake_cuda_history>', 'exec'), {})`
  );
  await runNew(
    page,
    'x = torch.randn(256, 1024)\nkept = [x * 2 for _ in range(4)]'
  );
  const rows = section.locator('tr[data-origin]');
  await expect(section).toHaveAttribute('data-state', 'recording');
  await expect(rows).toHaveCount(2);
  await expect(rows.nth(0)).toHaveAttribute('data-origin', 'cell [3] line 2');
  await expect(rows.nth(0)).toContainText('kept = [x * 2 for _ in range(4)]');
  await expect(rows.nth(0)).toContainText('4.0 MiB');
  await expect(rows.nth(1)).toHaveAttribute('data-origin', 'cell [3] line 1');
  await expect(rows.nth(1)).toContainText('1.0 MiB');
  // at the panel's default width the section fits: no sideways scroll, the toggle and its
  // measured cost in view
  const fit = await panel.evaluate(el => {
    const box = el.getBoundingClientRect();
    const inside = (selector: string) =>
      Array.from(el.querySelectorAll(selector)).every(
        node => node.getBoundingClientRect().right <= box.right + 1
      );
    return {
      scroll: el.scrollWidth <= el.clientWidth,
      links: inside('.jp-GpuHygiene-origins [data-action="go-to-origin"]'),
      bytes: inside('.jp-GpuHygiene-originTable td:nth-child(3)')
    };
  });
  expect(fit).toEqual({ scroll: true, links: true, bytes: true });
  await expect(section.locator('[data-cost="read"]')).toContainText(
    'reading them took'
  );
  await section.screenshot({ path: test.info().outputPath('origins.png') });

  // a link selects the cell whose code allocated the memory
  await page.notebook.selectCells(0);
  await rows.nth(0).locator('[data-action="go-to-origin"]').click();
  await expect
    .poll(() =>
      page.evaluate(
        () =>
          (window as any).jupyterapp.shell.currentWidget.content.activeCellIndex
      )
    )
    .toBe(2);

  // the panel's toggle turns it off: the next inventory has no origins
  await section.locator('[data-action="record-origins"]').click();
  await expect(section).toHaveCount(0);
  expect(noise).toEqual([]);
});
