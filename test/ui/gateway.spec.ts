/**
 * Run only by playwright.gateway.config.js: proves the notebook's kernel is
 * remote (it lives in the Kernel Gateway, not in the JupyterLab server) and
 * that the extension's agent reports from it.
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

test.use({ kernels: null, autoGoto: true });

const GATEWAY = 'http://127.0.0.1:8891';

test('the kernel runs in the Kernel Gateway and its agent reports', async ({
  page,
  request,
  tmpPath
}) => {
  await page.contents.uploadFile(
    path.resolve(__dirname, '../../examples/stacked-yolo.ipynb'),
    `${tmpPath}/stacked-yolo.ipynb`
  );
  await page.notebook.openByPath(`${tmpPath}/stacked-yolo.ipynb`);
  await expect(page.locator('.jp-GpuHygiene-gauge')).toHaveAttribute(
    'data-kind',
    'no-gpu',
    { timeout: 120000 }
  );
  const kernelId = await page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.sessionContext.session
        .kernel.id
  );
  const remote = await (await request.get(`${GATEWAY}/api/kernels`)).json();
  expect(remote.map((k: { id: string }) => k.id)).toContain(kernelId);
});
