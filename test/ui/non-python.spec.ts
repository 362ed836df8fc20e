/**
 * A kernel whose language is not Python (issue 5): the echo kernel of
 * test/ui/echo_kernel records every request it receives. The extension must
 * send it nothing — no agent, no comm — before or after a restart, and the
 * gauge says the kernel is not supported.
 */
import { expect, test } from '@jupyterlab/galata';
import { collectNoise, gaugeDetails } from './probes';
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { openNotebookOn, setCellSource } from './notebook-file';

// Galata's kernels fixture intercepts POST .../restart; a real restart needs it off.
test.use({ kernels: null, autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
/** One request as the echo kernel recorded it. */
interface IRecorded {
  channel: string;
  type: string;
  code?: string;
  silent?: boolean;
  store_history?: boolean;
  target?: string;
}

/** Run `%requests` in cell `index`: what the kernel process received so far. */
async function recorded(
  page: IJupyterLabPageFixture,
  index: number
): Promise<IRecorded[]> {
  await setCellSource(page, index, '%requests');
  await page.notebook.runCell(index);
  const output = (await page.notebook.getCellTextOutput(index)) ?? [];
  return JSON.parse(output.join('')) as IRecorded[];
}

test('a non-Python kernel is sent nothing and the gauge says it is not supported', async ({
  page,
  tmpPath
}, testInfo) => {
  const noise = collectNoise(page);

  await openNotebookOn(page, `${tmpPath}/echo.ipynb`, 'echo');
  await expect(page.locator(gauge)).toHaveAttribute(
    'data-kind',
    'unsupported',
    { timeout: 120000 }
  );
  await expect(page.locator(gauge)).toHaveText(
    'GPU hygiene: kernel not supported'
  );
  await expect.poll(() => gaugeDetails(page)).toMatch(/echo/);

  await setCellSource(page, 0, 'hello from the user');
  await page.notebook.runCell(0);
  expect((await page.notebook.getCellTextOutput(0))?.join('')).toBe(
    'hello from the user'
  );
  // Leave the extension time to misbehave (several sample intervals).
  await page.waitForTimeout(3000);
  const before = await recorded(page, 1);
  const executes = before.filter(r => r.type === 'execute_request');
  testInfo.annotations.push({
    type: 'echo kernel: requests received',
    description: JSON.stringify(before.map(r => r.type))
  });
  console.log(
    `echo kernel received: ${before.map(r => r.type).join(', ')}; execute requests: ${JSON.stringify(executes.map(r => r.code))}`
  );
  // Only the user's own cells, as typed; no comm was ever opened.
  expect(executes).toEqual([
    {
      channel: 'shell',
      type: 'execute_request',
      code: 'hello from the user',
      silent: false,
      store_history: true
    },
    {
      channel: 'shell',
      type: 'execute_request',
      code: '%requests',
      silent: false,
      store_history: true
    }
  ]);
  expect(before.filter(r => r.type.startsWith('comm_'))).toEqual([]);
  await expect(page.locator(gauge)).toHaveText(
    'GPU hygiene: kernel not supported'
  );
  // Clean GPU has nothing to clean in a kernel it does not support.
  expect(
    await page.evaluate(() =>
      (window as any).jupyterapp.commands.isEnabled('gpu-hygiene:clean')
    )
  ).toBe(false);

  // A restart: the new kernel process is not sent anything either.
  await page.evaluate(() => {
    void (window as any).jupyterapp.commands.execute('kernelmenu:restart');
  });
  await page.locator('.jp-Dialog .jp-mod-accept').click();
  await expect(page.locator(gauge)).toHaveText(
    'GPU hygiene: kernel not supported'
  );
  await page.waitForTimeout(3000);
  const after = await recorded(page, 2);
  console.log(
    `echo kernel after restart: ${after.map(r => r.type).join(', ')}`
  );
  expect(
    after.filter(r => r.type === 'execute_request').map(r => r.code)
  ).toEqual(['%requests']);
  expect(after.filter(r => r.type.startsWith('comm_'))).toEqual([]);
  await expect(page.locator(gauge)).toHaveText(
    'GPU hygiene: kernel not supported'
  );
  expect(noise).toEqual([]);
});
