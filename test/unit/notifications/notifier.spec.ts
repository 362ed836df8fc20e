import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { addCommands } from '../../../src/commands';
import { GpuKernelModel } from '../../../src/model';
import { GpuNotifier, TOAST_RULES } from '../../../src/notifications';
import type { IToastRule } from '../../../src/notifications/rule';
import type { ICleaned, IInventory, ISample } from '../../../src/protocol';
import { CommandIDs } from '../../../src/tokens';
import {
  c01Inventory,
  c08Inventory,
  graphHolder,
  oomMessage,
  OneModelMonitor
} from '../fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;
const GiB = 2 ** 30;

const all = () => Notification.manager.notifications;
const ofType = (type: Notification.TypeOptions) =>
  all().filter(n => n.type === type);

const cleaned: ICleaned = {
  protocol: 2,
  type: 'cleaned',
  executionCount: 4,
  models: { before: 2, after: 1 },
  freed: { cpu: MiB },
  allocated: null,
  reserved: null
};

/**
 * Cells whose allocated memory climbs 64 MiB each (a leak), the agent's way:
 * busy sample, inventory (`extra` on top of C01 without models), idle sample.
 */
function climb(
  model: GpuKernelModel,
  cells: number,
  extra: Partial<IInventory> = { models: [] }
): void {
  let t = 1_000;
  let seq = 0;
  const sample = (allocated: number, busy: boolean): ISample => ({
    protocol: 2,
    type: 'sample',
    t: (t += 0.5),
    seq: ++seq,
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
  });
  for (let i = 0; i < cells; i++) {
    const allocated = GiB + i * 64 * MiB;
    model.apply(sample(allocated, true));
    model.apply({
      ...c01Inventory(),
      ...extra,
      t: (t += 0.1),
      durationMs: 1,
      executionCount: i + 1
    });
    model.apply(sample(allocated, false));
    t += 5;
  }
}

describe('GpuNotifier wiring', () => {
  afterEach(() => Notification.dismiss());

  it('hands model events to the rules of the registry, in order', () => {
    expect(
      TOAST_RULES.map(
        create => create({ trans, actions: {} as any }).id // ids only
      )
    ).toEqual(['graphs', 'stacked', 'findings', 'leak', 'oom', 'cleaned']);
  });

  it('a new rule is one factory in the rules list', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const rule = (): IToastRule => ({
      id: 'custom',
      policy: 'update',
      describes: 'event',
      onCleaned: () => [
        { key: '', type: 'info', message: 'custom', autoClose: false }
      ]
    });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model),
      commands: new CommandRegistry(),
      trans,
      rules: [rule]
    });
    model.apply(cleaned);
    expect(all().map(n => [n.type, n.message])).toEqual([['info', 'custom']]);
    notifier.dispose();
  });

  it('dispose disconnects from the monitor and every model', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model);
    const calls: string[] = [];
    const spy = (): IToastRule => ({
      id: 'spy',
      policy: 'update',
      describes: 'state',
      onInventory: () => (calls.push('inventory'), null),
      onChanged: () => (calls.push('changed'), null),
      onCleaned: () => (calls.push('cleaned'), null),
      onOutOfMemory: () => (calls.push('oom'), null),
      onSettings: () => (calls.push('settings'), null)
    });
    const spied = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans,
      rules: [spy]
    });
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    model.apply(c01Inventory());
    expect(ofType('warning')).toHaveLength(1);
    expect(calls).toContain('inventory');
    spied.dispose();
    notifier.dispose();
    expect(notifier.isDisposed).toBe(true);
    notifier.dispose(); // twice: no-op
    calls.length = 0;
    Notification.dismiss();
    const stacked = c01Inventory();
    stacked.models.push({ ...stacked.models[1], id: '0x3', order: 3 });

    model.apply(stacked);
    model.apply(c08Inventory());
    model.apply(oomMessage());
    model.apply(cleaned);
    monitor.settingsChanged.emit(monitor.settings);
    const added = new GpuKernelModel({ kernelId: 'k2' });
    monitor.modelAdded.emit(added);
    added.apply(c01Inventory());
    added.apply(oomMessage());
    climb(added, 6);
    expect(all()).toHaveLength(0);
    expect(calls).toEqual([]);
  });

  it('after dispose, a disposed model no longer dismisses its toasts', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model),
      commands: new CommandRegistry(),
      trans
    });
    model.apply(c01Inventory());
    notifier.dispose();
    model.dispose();
    expect(ofType('warning')).toHaveLength(1);
  });

  it('a disposed model: its state toasts are dismissed, event toasts stay', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const other = new GpuKernelModel({ kernelId: 'k2' });
    const monitor = new OneModelMonitor(model);
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    monitor.modelAdded.emit(other);
    const count = (text: string) =>
      all().filter(n => n.message.includes(text)).length;
    // k1: stacked models, a graph holder and a leak, then an OOM and a clean.
    climb(model, 6, {
      models: c01Inventory().models,
      graphs: [graphHolder()]
    });
    model.apply(oomMessage());
    model.apply(cleaned);
    other.apply(c01Inventory());
    const otherId = all()[0].id; // the newest: k2's stacked toast
    expect(
      [
        'Stacked YOLO',
        'val_losses keeps 4 autograd graphs alive',
        'PyTorch allocated climbs',
        'CUDA out of memory in cell [7]',
        'Clean GPU freed'
      ].map(count)
    ).toEqual([2, 1, 1, 1, 1]);

    model.dispose();
    expect(
      [
        'Stacked YOLO',
        'val_losses keeps 4 autograd graphs alive',
        'PyTorch allocated climbs',
        'CUDA out of memory in cell [7]',
        'Clean GPU freed'
      ].map(count)
    ).toEqual([1, 0, 0, 1, 1]);
    expect(all().find(n => n.message.includes('Stacked YOLO'))?.id).toBe(
      otherId
    );

    // A new model for the same kernel (its notebook reopened): an OOM of the
    // same cell warns again and a clean raises a new "freed" toast (both were
    // forgotten); the graph holder already warned about in this kernel does
    // not warn again (once per kernel and variable, ever).
    const again = new GpuKernelModel({ kernelId: 'k1' });
    monitor.modelAdded.emit(again);
    again.apply(oomMessage());
    again.apply(cleaned);
    again.apply({ ...c08Inventory(), seq: 9 });
    expect(
      [
        'CUDA out of memory in cell [7]',
        'Clean GPU freed',
        'val_losses keeps 4 autograd graphs alive'
      ].map(count)
    ).toEqual([2, 2, 0]);
    notifier.dispose();
  });

  it('toast buttons show the commands’ captions', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model);
    const commands = new CommandRegistry();
    addCommands({
      commands,
      monitor,
      sessionDialogs: null,
      translator: nullTranslator,
      trans
    });
    const notifier = new GpuNotifier({ monitor, commands, trans });
    model.apply({ ...c01Inventory(), graphs: [graphHolder()] });
    model.apply(oomMessage());
    const args = { kernelId: 'k1' };
    const stacked = ofType('warning').find(n =>
      n.message.startsWith('Stacked')
    )!;
    // the stale-model warning stays until closed or resolved (issue 29)
    expect(stacked.options.autoClose).toBe(false);
    expect(stacked.options.actions?.map(a => [a.label, a.caption])).toEqual([
      ['Clean GPU', commands.caption(CommandIDs.clean, args)],
      ['Restart kernel', commands.caption(CommandIDs.restartKernel, args)],
      ["Don't warn again", 'Turn off stacked-model warnings in the settings']
    ]);
    const graph = ofType('warning').find(n =>
      n.message.startsWith('val_losses')
    )!;
    expect(graph.options.actions?.[0].caption).toBe(
      commands.caption(CommandIDs.fixGraphHolder, {
        kernelId: 'k1',
        name: 'val_losses'
      })
    );
    const [oom] = ofType('error');
    expect(oom.options.actions?.map(a => a.caption).slice(0, 2)).toEqual([
      commands.caption(CommandIDs.clean, args),
      commands.caption(CommandIDs.restartKernel, args)
    ]);
    notifier.dispose();
  });
});
