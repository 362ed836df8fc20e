/**
 * Two notebooks sharing one kernel (as with "Use Kernel from Other Session"):
 * one agent, one model; closing the notebook that connected first must not
 * leave the other one with a dead connection.
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';
import { setCellSource } from './notebook-file';

test.use({ kernels: null, autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';

test('the gauge keeps following a shared kernel after the first notebook closes', async ({
  page,
  tmpPath
}) => {
  await page.contents.uploadFile(
    path.resolve(__dirname, '../../examples/stacked-yolo.ipynb'),
    `${tmpPath}/stacked-yolo.ipynb`
  );
  await page.notebook.openByPath(`${tmpPath}/stacked-yolo.ipynb`);
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  const kernelId = await page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.sessionContext.session
        .kernel.id
  );

  await page.notebook.createNew('second.ipynb', { kernel: 'python3' });
  await page.evaluate(async id => {
    const panel = (window as any).jupyterapp.shell.currentWidget;
    await panel.sessionContext.changeKernel({ id });
  }, kernelId);
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu');

  await page.notebook.activate('stacked-yolo.ipynb');
  await page.notebook.close(true);
  await page.notebook.activate('second.ipynb');

  await setCellSource(page, 0, 'import torch\nnet = torch.nn.Linear(8, 8)');
  await page.notebook.runCell(0);
  // The inventory after this cell reaches the gauge through the remaining notebook.
  await expect(page.locator(gauge)).toContainText('No GPU · 1 model');
  const sameKernel = await page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.sessionContext.session
        .kernel.id
  );
  expect(sameKernel).toBe(kernelId);
});
