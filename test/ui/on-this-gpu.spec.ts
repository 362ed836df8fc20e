/**
 * "Who else is on my GPU" (issue 12) in a real JupyterLab with the built
 * extension and its server extension (`GET gpu-hygiene/kernels`), two real
 * ipykernels and Debian chromium.
 *
 * This machine has no GPU, so NVML is replaced by a synthetic message: the
 * first kernel's model gets a `gpuProcesses` (as the agent's sampler sends
 * it where NVML works) that lists both kernels' real pids, read from the
 * server endpoint (and checked against the `hello.pid` each agent reported),
 * and one process that is not a kernel. Everything after that is real: the
 * browser asks the server who those pids are, the VRAM panel's "On this
 * GPU" table of the first notebook lists the second kernel with its notebook
 * name, and "Shut down kernel…" asks (Cancel leaves it running), then shuts
 * it down through JupyterLab's kernel manager: the second kernel is gone
 * from /api/kernels and the first one still runs.
 */
import { expect, test } from '@jupyterlab/galata';
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { openNotebookOn, setCellSource } from './notebook-file';
import { collectNoise, openPanelFromGauge } from './probes';

test.use({ autoGoto: true });

const gauge = '.jp-GpuHygiene-gauge';
const panel = '#jp-GpuHygiene-panel';
const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** Id of the current notebook's kernel. */
function currentKernelId(page: IJupyterLabPageFixture): Promise<string> {
  return page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.sessionContext.session
        .kernel.id
  );
}

/** The `hello.pid` of a kernel's model (null before the agent said hello). */
function helloPid(
  page: IJupyterLabPageFixture,
  kernelId: string
): Promise<number | null> {
  return page.evaluate(async id => {
    const app = (window as any).jupyterapp;
    const token = [...app.pluginRegistry._services.keys()].find(
      (t: any) => t.name === 'jupyterlab-gpu-hygiene:IGpuMonitor'
    );
    const monitor = await app.resolveRequiredService(token);
    const model = monitor.models.find((m: any) => m.kernelId === id);
    return model?.hello?.pid ?? null;
  }, kernelId);
}

/** The server's kernel ids (`/api/kernels`). */
async function runningKernels(page: IJupyterLabPageFixture): Promise<string[]> {
  const response = await page.request.get('/api/kernels');
  expect(response.ok()).toBe(true);
  return (await response.json()).map((k: { id: string }) => k.id);
}

test('On this GPU: the other notebook’s kernel, named by the server, shut down after the dialog', async ({
  page,
  tmpPath
}) => {
  const noise = collectNoise(page);

  await openNotebookOn(page, `${tmpPath}/first.ipynb`, 'python3');
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  const first = await currentKernelId(page);
  await openNotebookOn(page, `${tmpPath}/second.ipynb`, 'python3');
  await expect(page.locator(gauge)).toHaveText(/^No GPU( · \S+ \S+ RAM)?$/, {
    timeout: 120000
  });
  const second = await currentKernelId(page);
  expect(second).not.toBe(first);

  // The kernels' pids, as the server extension answers them (local
  // provisioner); each is the pid its agent reported (os.getpid()).
  const answer = await (await page.request.get('/gpu-hygiene/kernels')).json();
  expect(answer.gateway).toBe(false);
  const pidOf = (id: string): number =>
    answer.kernels.find((k: { id: string }) => k.id === id).pid;
  const [firstPid, secondPid] = [pidOf(first), pidOf(second)];
  expect(typeof firstPid).toBe('number');
  expect(typeof secondPid).toBe('number');
  await expect.poll(() => helloPid(page, first)).toBe(firstPid);
  await expect.poll(() => helloPid(page, second)).toBe(secondPid);
  expect(
    answer.kernels
      .find((k: { id: string }) => k.id === second)
      .sessions.map((s: { path: string }) => s.path)
  ).toEqual([`${tmpPath}/second.ipynb`]);

  // NVML, replaced: what the first kernel's agent would send on a GPU.
  await page.notebook.activate('first.ipynb');
  await page.evaluate(
    async ({ first, firstPid, secondPid, GiB, MiB }) => {
      const app = (window as any).jupyterapp;
      const token = [...app.pluginRegistry._services.keys()].find(
        (t: any) => t.name === 'jupyterlab-gpu-hygiene:IGpuMonitor'
      );
      const monitor = await app.resolveRequiredService(token);
      const model = monitor.models.find((m: any) => m.kernelId === first);
      model.apply({
        protocol: 2,
        type: 'gpuProcesses',
        t: Date.now() / 1000,
        pid: firstPid,
        namespace: 'host',
        devices: [
          {
            index: 0,
            processes: [
              {
                pid: secondPid,
                kind: 'compute',
                used: 1.5 * GiB,
                name: 'python',
                cmdline: 'python -m ipykernel_launcher -f kernel.json',
                user: 'jovyan',
                self: false
              },
              {
                pid: firstPid,
                kind: 'compute',
                used: 620 * MiB,
                name: 'python',
                cmdline: 'python -m ipykernel_launcher -f kernel.json',
                user: 'jovyan',
                self: true
              },
              {
                pid: 999_999,
                kind: 'graphics',
                used: 512 * MiB,
                name: 'blender',
                cmdline: 'blender --background scene.blend --render-anim',
                user: 'bob',
                self: false
              }
            ]
          }
        ]
      });
    },
    { first, firstPid, secondPid, GiB, MiB }
  );

  // The first notebook's panel: the second kernel with its notebook's name.
  await openPanelFromGauge(page);
  await expect(page.locator(`${panel} .jp-GpuHygiene-panelKernel`)).toHaveText(
    'first.ipynb'
  );
  const table = page.locator(`${panel} .jp-GpuHygiene-gpuProcesses`);
  await expect(table).toBeVisible();
  const other = table.locator(`tr[data-pid="${secondPid}"]`);
  await expect(other).toHaveAttribute('data-kind', 'your-kernel');
  await expect(other).toContainText('second.ipynb');
  await expect(other).toContainText('1.5 GiB');
  await expect(other).toContainText('idle');
  await expect(other.locator('.jp-GpuHygiene-code').first()).toHaveText(
    second.slice(0, 8)
  );
  const self = table.locator(`tr[data-pid="${firstPid}"]`);
  await expect(self).toHaveAttribute('data-kind', 'this-kernel');
  await expect(self.locator('[data-action="shutdown"]')).toHaveCount(0);
  const blender = table.locator('tr[data-pid="999999"]');
  await expect(blender).toHaveAttribute('data-kind', 'other-process');
  await expect(blender).toContainText('blender · bob');
  await expect(blender.locator('.jp-GpuHygiene-cmdline')).toHaveAttribute(
    'title',
    'blender --background scene.blend --render-anim'
  );
  await expect(blender.locator('[data-action="shutdown"]')).toHaveCount(0);

  // Shut down kernel…: the dialog names the notebook and what it frees; Cancel keeps it.
  const shutdown = other.getByRole('button', { name: 'Shut down kernel…' });
  await expect(shutdown).toHaveAttribute(
    'title',
    'Ask, then shut down the kernel of second.ipynb: frees 1.5 GiB of VRAM, its variables are lost'
  );
  await shutdown.click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Shut down the kernel of second.ipynb?');
  await expect(dialog).toContainText('it frees 1.5 GiB of VRAM');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toHaveCount(0);
  expect(await runningKernels(page)).toContain(second);

  await shutdown.click();
  await expect(dialog).toContainText('second.ipynb');
  await dialog.getByRole('button', { name: 'Shut down' }).click();
  await expect(dialog).toHaveCount(0);
  await expect.poll(() => runningKernels(page)).not.toContain(second);
  expect(await runningKernels(page)).toContain(first);
  // The server no longer lists it: no Shut down button for that pid any more.
  await expect(other.locator('[data-action="shutdown"]')).toHaveCount(0);
  // The first notebook's kernel still answers.
  await setCellSource(page, 0, '6 * 7');
  await page.notebook.runCell(0);
  expect(await page.notebook.getCellTextOutput(0)).toEqual([
    expect.stringMatching(/^42\s*$/)
  ]);

  expect(noise).toEqual([]);
});
