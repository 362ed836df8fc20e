/**
 * Screenshots for the record, at Galata's default window size, in the light
 * and the dark theme: the stacked-model toast, the gauge's popup and the
 * VRAM panel of a real kernel (torch on the CPU, a small model run twice).
 * All are test artifacts (`test.info().outputPath`); the README's pictures
 * (docs/img/toast.png, panel.png) are of a GPU session, taken by
 * replay.spec.ts from a recording.
 */
import { expect, test } from '@jupyterlab/galata';
import { openNotebookOn } from './notebook-file';
import { GAUGE, GAUGE_POPUP, openGaugePopup } from './probes';

test.use({ autoGoto: true });

const PANEL = '#jp-GpuHygiene-panel';
const TOAST = '.Toastify__toast';

const CELLS = [
  'import torch',
  'model = torch.nn.Sequential(\n    torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)\n)\nmodel'
];

test('toast, gauge popup and VRAM panel, light and dark', async ({
  page,
  tmpPath
}, testInfo) => {
  test.setTimeout(300000);
  await openNotebookOn(page, `${tmpPath}/stacked.ipynb`, 'python3', CELLS);
  await expect(page.locator(GAUGE)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await page.notebook.runCell(0);
  await page.notebook.runCell(1);
  await expect(page.locator(GAUGE)).toContainText('1 model');
  await page.notebook.runCell(1);
  await expect(page.locator(GAUGE)).toContainText('2 models');
  const toast = page.locator(TOAST, { hasText: 'Stacked Sequential' });
  await expect(toast).toBeVisible();

  for (const [theme, name] of [
    ['JupyterLab Light', 'light'],
    ['JupyterLab Dark', 'dark']
  ]) {
    await page.evaluate(
      async t =>
        (window as any).jupyterapp.commands.execute('apputils:change-theme', {
          theme: t
        }),
      theme
    );
    await expect
      .poll(() =>
        page.evaluate(() => document.body.getAttribute('data-jp-theme-name'))
      )
      .toBe(theme);
    await expect(toast).toBeVisible();
    await toast.screenshot({ path: testInfo.outputPath(`toast-${name}.png`) });

    // The toast sits over the status bar's corner and the sidebar: out of
    // the way (hidden, not closed) for the popup and the panel.
    await page.addStyleTag({
      content: '.jp-toastContainer { visibility: hidden !important; }'
    });
    const popup = await openGaugePopup(page);
    await popup.screenshot({
      path: testInfo.outputPath(`gauge-popup-${name}.png`)
    });
    await page.screenshot({
      path: testInfo.outputPath(`gauge-popup-page-${name}.png`)
    });
    await page.keyboard.press('Escape');
    await expect(page.locator(GAUGE_POPUP)).toHaveCount(0);

    await page.evaluate(() =>
      (window as any).jupyterapp.commands.execute('gpu-hygiene:open-panel')
    );
    const panel = page.locator(PANEL);
    await expect(panel.locator('.jp-GpuHygiene-panelContent')).toBeVisible();
    await expect(panel.locator('.jp-GpuHygiene-holders tbody tr')).toHaveCount(
      2
    );
    await panel.screenshot({
      path: testInfo.outputPath(`vram-panel-${name}.png`)
    });
    await page.evaluate(() =>
      document.querySelectorAll('style').forEach(tag => {
        if (tag.textContent?.includes('.jp-toastContainer { visibility')) {
          tag.remove();
        }
      })
    );
  }
});
