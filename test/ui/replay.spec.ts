/**
 * Browser test of recorded GPU sessions (issue 15): there is no GPU here, so
 * a notebook runs on the replay kernel (test/ui/replay_kernel, kernelspec
 * `gpu-hygiene-replay`), which answers the agent's install without running it
 * and plays a recording of test/recordings (made by
 * scripts/record_session.py in a real kernel with the real agent) through the
 * real comm: `%gpu_replay <name> --speed 4` keeps the cell running until the
 * last recorded message was sent. The gauge, the toasts and the model then
 * show what the recorded session showed.
 *
 * The CPU smoke recording (test/recordings/cpu-smoke.jsonl, recorded on the
 * CPU: no devices, VRAM figures null) is checked here in full. The GPU
 * scenarios (test/recordings/scenarios/*.py, to be recorded on the H200) are
 * skipped while their recording is missing or was made on the CPU; their
 * GPU-specific assertions are marked TODO(lead) below.
 */
import { expect, test } from '@jupyterlab/galata';
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';
import { openNotebookOn } from './notebook-file';
import { collectNoise, currentModel } from './probes';

test.use({ autoGoto: true });

const RECORDINGS = path.resolve(__dirname, '../recordings');
const gauge = '.jp-GpuHygiene-gauge';
const toast = '.Toastify__toast';
const SPEED = 4;

/** A recording as the replay kernel reads it: header, "out" messages, events. */
interface IRecording {
  header: {
    scenario: string;
    env: { device: string; totalBytes: number | null };
  };
  /** The `data` of the "out" events (kernel → browser), in time order. */
  out: Array<Record<string, any>>;
  events: Array<Record<string, any>>;
}

/** Recording `name` of test/recordings, or null when there is none. */
function readRecording(name: string): IRecording | null {
  const file = path.join(RECORDINGS, `${name}.jsonl`);
  if (!fs.existsSync(file)) {
    return null;
  }
  const lines = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(line => line.trim());
  const [header, ...events] = lines.map(line => JSON.parse(line));
  return {
    header,
    events,
    out: events.filter(e => e.dir === 'out').map(e => e.data)
  };
}

/**
 * Open a notebook on the replay kernel, wait for its neutral hello, run
 * `%gpu_replay <name> --speed <speed>` (runCell returns when the cell
 * finished, i.e. when the last message was sent) and return its output.
 */
async function replay(
  page: IJupyterLabPageFixture,
  tmpPath: string,
  name: string,
  speed = SPEED
): Promise<string> {
  await openNotebookOn(page, `${tmpPath}/${name}.ipynb`, 'replay', [
    `%gpu_replay ${name} --speed ${speed}`
  ]);
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu', {
    timeout: 120000
  });
  await expect(page.locator(gauge)).toHaveAttribute(
    'title',
    /replay kernel: no recording replayed yet/
  );
  await page.notebook.runCell(0);
  return ((await page.notebook.getCellTextOutput(0)) ?? []).join('');
}

/** What every replay must give: all messages sent, none dropped, the recorded kernel. */
async function expectReplayed(
  page: IJupyterLabPageFixture,
  recording: IRecording,
  output: string
): Promise<void> {
  const name = recording.header.scenario;
  expect(output).toMatch(
    new RegExp(`^replayed ${recording.out.length} messages of ${name} in `)
  );
  const hello = recording.out.find(m => m.type === 'hello')!;
  const inventories = recording.out.filter(m => m.type === 'inventory');
  const model = await currentModel(page);
  expect(model).not.toBeNull();
  expect(model!.status).toBe('ready');
  // every recorded message passed the browser's validation
  expect(model!.dropped).toBe(0);
  // the recorded kernel's hello replaced the neutral one
  expect(model!.pid).toBe(hello.pid);
  expect(model!.inventories).toBe(inventories.length);
  expect(model!.errors).toEqual([]);
}

test('the CPU smoke recording: the recorded models, holders and toast', async ({
  page,
  tmpPath
}) => {
  const noise = collectNoise(page);
  const recording = readRecording('cpu-smoke');
  expect(recording?.header.env.device).toBe('cpu');

  const output = await replay(page, tmpPath, 'cpu-smoke');
  await expectReplayed(page, recording!, output);

  // the recorded agent's hello: no NVML on the machine that recorded it
  const hello = recording!.out.find(m => m.type === 'hello')!;
  await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'no-gpu');
  expect(await page.locator(gauge).getAttribute('title')).toContain(
    `VRAM not measurable: ${hello.nvmlError}`
  );
  // the model cell ran twice: the older MLP is held only by the output cache
  await expect(page.locator(gauge)).toContainText('No GPU · 2 models');
  await expect(page.locator(gauge)).toHaveAttribute(
    'title',
    /Live models: 2 \(1 stale\)/
  );
  const stacked = page.locator(toast, { hasText: 'Stacked Sequential' });
  await expect(stacked).toBeVisible();
  await expect(stacked).toContainText('held only by Out[2], _2, __');
  for (const label of ['Clean GPU', 'Restart kernel']) {
    await expect(stacked.getByRole('button', { name: label })).toHaveCount(1);
  }
  expect(noise).toEqual([]);
});

/**
 * The GPU scenarios, once recorded on the H200 with
 * `scripts/record_session.py --device cuda` (test/recordings/<name>.jsonl).
 * `check` holds what only that session shows.
 */
const GPU_SCENARIOS: Array<{
  name: string;
  speed: number;
  check: (page: IJupyterLabPageFixture, recording: IRecording) => Promise<void>;
}> = [
  {
    name: 'leak-append-loss',
    speed: SPEED,
    check: async page => {
      // TODO(lead): the leak-trend warning (src/notifications/leak.ts) while the
      // training cells climb, naming `val_losses` as what holds the growth; the
      // graph-holder warning for `val_losses` (src/notifications/graphs.ts,
      // >= 64 MiB on CUDA); the gauge's VRAM figure after ~5 GiB of graphs.
      await expect(page.locator(toast, { hasText: 'val_losses' })).toHaveCount(
        1
      );
    }
  },
  {
    name: 'leak-fixed-item',
    speed: SPEED,
    check: async page => {
      // TODO(lead): no leak-trend and no graph-holder warning (flat allocated).
      await expect(page.locator(toast, { hasText: 'val_losses' })).toHaveCount(
        0
      );
    }
  },
  {
    name: 'yolo-train',
    speed: SPEED,
    check: async () => {
      // TODO(lead): the training progress (sample.progress, epoch n of 5) while
      // the training cell replays, once helper "epoch" shows it; the trainer
      // findings after training (test/fixtures/inventory_after_training.json).
    }
  },
  {
    name: 'stacked-yolo',
    speed: SPEED,
    check: async page => {
      // TODO(lead): confirm on the recording (as stacked-yolo.spec.ts on the CPU).
      const stacked = page.locator(toast, { hasText: 'Stacked YOLO' });
      await expect(stacked).toBeVisible();
      await expect(stacked).toContainText('held only by Out[2], _2, __');
    }
  },
  {
    name: 'cuda-oom',
    speed: SPEED,
    check: async page => {
      // TODO(lead): confirm the figures on the recording: ~149 GiB requested in
      // cell [3], the device's free and total memory, the traceback's frame
      // `attention` in the panel.
      await expect(
        page.locator(toast, { hasText: 'CUDA out of memory in cell [3]' })
      ).toHaveCount(1);
    }
  },
  {
    name: 'leak-append-loss-capped',
    speed: SPEED,
    check: async page => {
      // TODO(lead): the OOM toast under the cap (helper "leak": the device's
      // `limit`, 8 GiB, shown as the ceiling instead of the device's total).
      await expect(
        page.locator(toast, { hasText: 'CUDA out of memory in cell [3]' })
      ).toHaveCount(1);
    }
  }
];

for (const scenario of GPU_SCENARIOS) {
  test(`the GPU recording ${scenario.name}`, async ({ page, tmpPath }) => {
    const recording = readRecording(scenario.name);
    test.skip(
      recording === null || recording.header.env.device === 'cpu',
      `test/recordings/${scenario.name}.jsonl is not recorded on a GPU yet`
    );
    const noise = collectNoise(page);
    const output = await replay(page, tmpPath, scenario.name, scenario.speed);
    await expectReplayed(page, recording!, output);
    // a CUDA device: the gauge shows VRAM of the recorded device's total
    await expect(page.locator(gauge)).toHaveAttribute('data-kind', 'gpu');
    await expect(page.locator(gauge)).toContainText(/VRAM .+ \/ .+GiB/);
    await scenario.check(page, recording!);
    expect(noise).toEqual([]);
  });
}
