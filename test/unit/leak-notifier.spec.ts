import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { GpuKernelModel } from '../../src/model';
import { describeLeak, findLeak, GpuNotifier } from '../../src/notifications';
import type { ISample } from '../../src/protocol';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { c01Inventory, graphHolder, OneModelMonitor } from './fixtures';
import * as shapes from './leak-shape-cells';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** Feeds a model the way the agent does: busy samples, the inventory, an idle sample. */
class Kernel {
  constructor(readonly model: GpuKernelModel) {}
  t = 1_000;
  seq = 0;
  count = 0;
  sample(allocated: number, busy: boolean): void {
    const s: ISample = {
      protocol: 2,
      type: 'sample',
      t: this.t,
      seq: ++this.seq,
      busy,
      devices: [
        {
          index: 0,
          used: allocated + GiB,
          total: 80 * GiB,
          process: allocated + GiB,
          allocated,
          reserved: allocated + 256 * MiB,
          cached: 256 * MiB,
          nonTorch: GiB - 256 * MiB,
          processHidden: false
        }
      ]
    };
    this.model.apply(s);
    this.t += 0.5;
  }
  /** One cell: `allocated` bytes after it. */
  cell(allocated: number): void {
    this.sample(allocated, true);
    this.model.apply({
      ...c01Inventory(),
      models: [],
      t: this.t,
      durationMs: 1,
      executionCount: ++this.count
    });
    this.t += 0.1;
    this.sample(allocated, false);
    this.t += 5;
  }
}

const warnings = () =>
  Notification.manager.notifications.filter(n => n.type === 'warning');

describe('leak-trend toast', () => {
  afterEach(() => Notification.dismiss());

  it('raises one toast per kernel, updates it, and dismisses it when the climb stops', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model, { warnOnStackedModels: false });
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    const kernel = new Kernel(model);
    kernel.model.apply({
      ...c01Inventory(),
      models: [],
      executionCount: null,
      t: 999
    });
    for (let i = 0; i < 4; i++) {
      kernel.cell(GiB + i * 64 * MiB);
    }
    expect(warnings()).toHaveLength(0); // 4 cells < leakMinPoints
    kernel.cell(GiB + 4 * 64 * MiB);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0].message).toBe(
      'PyTorch allocated climbs ~64.0 MiB per cell over 5 cells. Tensors kept alive? e.g. losses.append(loss), not loss.item()'
    );
    expect(warnings()[0].options.actions?.map(a => a.label)).toEqual([
      'Open VRAM panel',
      "Don't warn again"
    ]);
    kernel.cell(GiB + 5 * 64 * MiB);
    expect(warnings()).toHaveLength(1); // updated, not stacked
    expect(warnings()[0].message).toContain('over 6 cells');
    kernel.cell(GiB); // a clean cell: back to the start
    expect(warnings()).toHaveLength(0);
    notifier.dispose();
  });

  it('does not warn for a single model load', () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model, { warnOnStackedModels: false }),
      commands: new CommandRegistry(),
      trans
    });
    const kernel = new Kernel(model);
    for (let i = 0; i < 10; i++) {
      kernel.cell(i < 4 ? GiB : 5 * GiB);
    }
    expect(findLeak(model, DEFAULT_SETTINGS)).toBeNull();
    expect(warnings()).toHaveLength(0);
    notifier.dispose();
  });

  it("'Don't warn again' turns the setting off and dismisses the toast", () => {
    const model = new GpuKernelModel({ kernelId: 'k3' });
    const monitor = new OneModelMonitor(model, { warnOnStackedModels: false });
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    const kernel = new Kernel(model);
    for (let i = 0; i < 6; i++) {
      kernel.cell(GiB + i * 64 * MiB);
    }
    warnings()[0]
      .options.actions?.find(a => a.label === "Don't warn again")
      ?.callback(new MouseEvent('click'));
    expect(monitor.settings.warnOnLeak).toBe(false);
    expect(warnings()).toHaveLength(0);
    kernel.cell(GiB + 6 * 64 * MiB);
    expect(warnings()).toHaveLength(0);
    notifier.dispose();
  });

  it('inside a running cell: the time to full and Interrupt kernel; once the cell ended, its graph holder and Fix…', () => {
    const model = new GpuKernelModel({ kernelId: 'k4' });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model, { warnOnStackedModels: false }),
      commands: new CommandRegistry(),
      trans
    });
    model.apply({ ...c01Inventory(), models: [], executionCount: 11, t: 999 });
    // cell [12]: 490 MiB of validation losses kept every 4 s epoch
    const busy = shapes.sampleShape(shapes.stairsLeak(4), {
      intervalS: 1,
      subReads: true,
      seed: 1
    });
    for (const sample of busy.slice(0, 30)) {
      model.apply(sample);
    }
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0].message).toMatch(
      /^PyTorch allocated climbs ~7\.\d GiB per minute in cell \[12\]; at this rate the GPU is full in ~\d+ min\./
    );
    expect(warnings()[0].options.actions?.map(a => a.label)).toEqual([
      'Interrupt kernel',
      'Open VRAM panel',
      "Don't warn again"
    ]);
    // the cell ends: its inventory (cell [12]) names the list that kept the graphs
    const last = busy[29];
    model.apply({
      ...c01Inventory(),
      models: [],
      executionCount: 12,
      t: last.t + 0.2,
      durationMs: 5,
      graphs: [graphHolder({ count: 7, bytes: { 'cuda:0': 7 * 490 * MiB } })]
    });
    model.apply({ ...last, t: last.t + 0.3, seq: last.seq + 1, busy: false });
    // the same leak toast, updated; the graph-holder rule raises its own
    const leak = warnings().filter(n =>
      n.message.startsWith('PyTorch allocated')
    );
    expect(leak).toHaveLength(1);
    expect(leak[0].message).toMatch(
      /^PyTorch allocated climbed ~7\.\d GiB per minute in cell \[12\]\. val_losses keeps autograd graphs: store loss\.item\(\)\.$/
    );
    expect(leak[0].options.actions?.map(a => a.label)).toEqual([
      'Fix…',
      'Open VRAM panel',
      "Don't warn again"
    ]);
    expect(warnings().map(n => n.message)).toContain(
      'val_losses keeps 7 autograd graphs alive (~3.3 GiB on cuda:0): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
    );
    notifier.dispose();
  });

  it('names the device when there are several and stays within 140 characters', () => {
    const text = describeLeak(
      {
        verdict: 'rising',
        basis: 'samples',
        device: 3,
        rate: 1234 * MiB,
        slope: 0,
        r2: 0.97,
        points: 600,
        intercept: 0,
        executionCount: 12345,
        shape: 'ramp',
        since: 1000,
        floor: { t: 1060, bytes: 2 * GiB },
        interval: null,
        cellStart: 1000
      },
      trans,
      8
    );
    expect(text).toBe(
      'PyTorch allocated climbed ~1.2 GiB per minute in cell [12345] on cuda:3. Tensors kept alive? e.g. losses.append(loss), not loss.item()'
    );
    expect(text.length).toBeLessThanOrEqual(140);
  });
});
