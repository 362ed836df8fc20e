import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { findStackedModels } from '../../src/analysis/memory/stacking';
import { GpuKernelModel } from '../../src/model';
import {
  describeCleaned,
  describeStacking,
  GpuNotifier
} from '../../src/notifications';
import { c01Inventory, OneModelMonitor, yolo } from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

describe('describeStacking', () => {
  it('names both models, their sizes and what holds the older one (C01)', () => {
    const [group] = findStackedModels(c01Inventory());
    expect(describeStacking(group, trans)).toBe(
      'Stacked YOLO: older YOLO (yolov8n.yaml), 12.1 MiB, held only by Out[2], _2, __; newer YOLO (yolov8n.yaml), 12.1 MiB in RAM.'
    );
  });

  it('names the variable that still holds the older one (issue 17: was "still named by first")', () => {
    const inventory = c01Inventory();
    inventory.models[0].holders = [
      { kind: 'variable', name: 'first', path: 'first' }
    ];
    inventory.models[0].stale = false;
    const [group] = findStackedModels(inventory);
    expect(describeStacking(group, trans)).toBe(
      'Stacked YOLO: first still holds YOLO (yolov8n.yaml), 12.1 MiB; newer YOLO (yolov8n.yaml), 12.1 MiB in RAM.'
    );
  });

  it('stays within the 140 characters of a toast', () => {
    const inventory = c01Inventory();
    inventory.models[0].holders = Array.from({ length: 40 }, (_, i) => ({
      kind: 'output' as const,
      name: `_${i + 10}`,
      path: `_${i + 10}`
    }));
    inventory.models[0].label = 'YOLO (' + 'x'.repeat(60) + '.yaml)';
    const [group] = findStackedModels(inventory);
    const text = describeStacking(group, trans);
    expect(text.length).toBeLessThanOrEqual(140);
    expect(text).toContain('Stacked YOLO');
  });
});

describe('describeCleaned', () => {
  it('reports freed bytes and the model count', () => {
    expect(
      describeCleaned(
        {
          protocol: 2,
          type: 'cleaned',
          executionCount: 4,
          models: { before: 2, after: 1 },
          freed: { 'cuda:0': 12 * 2 ** 20 },
          allocated: {
            'cuda:0': { before: 60 * 2 ** 20, after: 48 * 2 ** 20 }
          },
          reserved: { 'cuda:0': { before: 80 * 2 ** 20, after: 64 * 2 ** 20 } }
        },
        trans
      )
    ).toBe(
      'Clean GPU freed 12.0 MiB of models (2 → 1 live). PyTorch allocated −12.0 MiB, reserved −16.0 MiB.'
    );
  });
});

describe('GpuNotifier', () => {
  afterEach(() => {
    Notification.dismiss();
  });

  const warnings = () =>
    Notification.manager.notifications.filter(n => n.type === 'warning');

  it('raises one toast per kernel, updates it, and dismisses it when resolved', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model);
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });

    model.apply(c01Inventory());
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0].message).toContain('held only by Out[2], _2, __');
    expect(warnings()[0].options.actions?.map(a => a.label)).toEqual([
      'Clean GPU',
      'Restart kernel',
      "Don't warn again"
    ]);

    // The same situation after another cell: no new toast.
    model.apply({ ...c01Inventory(), seq: 4 });
    expect(warnings()).toHaveLength(1);

    // A third instance: the same toast is updated, not stacked.
    const third = c01Inventory();
    third.models.push(yolo({ id: 'c', order: 3 }));
    model.apply(third);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0].message).toContain('(and 1 older one)');

    // After a clean only one model is left: the toast goes away.
    model.apply({ ...c01Inventory(), models: [c01Inventory().models[1]] });
    expect(warnings()).toHaveLength(0);
    notifier.dispose();
  });

  it("'Don't warn again' turns the setting off and no toast follows", async () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    const monitor = new OneModelMonitor(model);
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    model.apply(c01Inventory());
    const action = warnings()[0].options.actions?.find(
      a => a.label === "Don't warn again"
    );
    action?.callback(new MouseEvent('click'));
    expect(monitor.settings.warnOnStackedModels).toBe(false);
    Notification.dismiss();
    model.apply({
      ...c01Inventory(),
      models: [...c01Inventory().models, yolo({ id: 'z', order: 9 })]
    });
    expect(warnings()).toHaveLength(0);
    notifier.dispose();
  });

  it('follows the setting at once: off dismisses the toast, on raises it again', () => {
    const model = new GpuKernelModel({ kernelId: 'k4' });
    const monitor = new OneModelMonitor(model);
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    model.apply(c01Inventory());
    expect(warnings()).toHaveLength(1);
    monitor.settings = { ...monitor.settings, warnOnStackedModels: false };
    monitor.settingsChanged.emit(monitor.settings);
    expect(warnings()).toHaveLength(0);
    monitor.settings = { ...monitor.settings, warnOnStackedModels: true };
    monitor.settingsChanged.emit(monitor.settings);
    expect(warnings()).toHaveLength(1);
    notifier.dispose();
  });

  it('keeps one "freed" toast per kernel', () => {
    const model = new GpuKernelModel({ kernelId: 'k5' });
    const monitor = new OneModelMonitor(model);
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    const cleaned = {
      protocol: 2 as const,
      type: 'cleaned' as const,
      executionCount: 4,
      models: { before: 2, after: 1 },
      freed: { cpu: 2 ** 20 },
      allocated: null,
      reserved: null
    };
    model.apply(cleaned);
    model.apply({
      ...cleaned,
      executionCount: 5,
      models: { before: 1, after: 1 },
      freed: {}
    });
    const freed = Notification.manager.notifications.filter(n =>
      n.message.startsWith('Clean GPU freed')
    );
    expect(freed).toHaveLength(1);
    expect(freed[0].message).toContain('(1 → 1 live)');
    // nothing freed is no success (issue 28, item 1): the updated toast is an info
    expect(freed[0].type).toBe('info');
    notifier.dispose();
  });

  it('runs the clean command for that kernel from the toast', () => {
    const model = new GpuKernelModel({ kernelId: 'k3' });
    const monitor = new OneModelMonitor(model);
    const commands = new CommandRegistry();
    const calls: unknown[] = [];
    commands.addCommand('gpu-hygiene:clean', {
      execute: args => void calls.push(args)
    });
    const notifier = new GpuNotifier({ monitor, commands, trans });
    model.apply(c01Inventory());
    warnings()[0]
      .options.actions?.find(a => a.label === 'Clean GPU')
      ?.callback(new MouseEvent('click'));
    expect(calls).toEqual([{ kernelId: 'k3' }]);
    notifier.dispose();
  });
});

describe('stacked toast after issue 17', () => {
  afterEach(() => {
    Notification.dismiss();
  });
  const MiB = 2 ** 20;
  const hidden = {
    kind: 'hidden' as const,
    name: 'unreachable from the namespace',
    path: 'unreachable from the namespace'
  };

  function setup(settings = {}) {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model, settings);
    const commands = new CommandRegistry();
    const calls: unknown[] = [];
    commands.addCommand('gpu-hygiene:delete-model', {
      label: 'Delete Variables Holding Model…',
      caption: 'Ask, then delete',
      execute: args => void calls.push(args)
    });
    const notifier = new GpuNotifier({ monitor, commands, trans });
    return { model, notifier, calls };
  }

  it('an older model still named by m: INFO with "Delete m…", no Clean GPU', () => {
    const { model, notifier, calls } = setup();
    const inventory = c01Inventory();
    inventory.models[0].holders = [{ kind: 'variable', name: 'm', path: 'm' }];
    inventory.models[0].stale = false;
    model.apply(inventory);
    const toasts = Notification.manager.notifications;
    expect(toasts.map(t => t.type)).toEqual(['info']);
    expect(toasts[0].message).toContain(
      'm still holds YOLO (yolov8n.yaml), 12.1 MiB'
    );
    expect(toasts[0].options.actions?.map(a => [a.label, a.caption])).toEqual([
      ['Delete m…', 'Ask, then delete'],
      ["Don't warn again", 'Turn off stacked-model warnings in the settings']
    ]);
    toasts[0].options.actions?.[0].callback(new MouseEvent('click'));
    expect(calls).toEqual([
      { kernelId: 'k1', modelId: '0x7f0000000001', names: ['m'] }
    ]);
    // The older one becomes stale: the same toast turns into the warning.
    model.apply(c01Inventory());
    expect(Notification.manager.notifications.map(t => t.type)).toEqual([
      'warning'
    ]);
    notifier.dispose();
  });

  it('never fires for the modules of a collected model or for parts', () => {
    const { model, notifier } = setup();
    const layers = ['Conv', 'C2f', 'Detect'].map((className, i) =>
      yolo({
        id: `0x${i + 10}`,
        order: i + 10,
        className,
        label: className,
        bytes: { 'cuda:0': 4 * MiB },
        holders: [hidden],
        stale: true
      })
    );
    const ema = yolo({
      id: '0x20',
      order: 20,
      className: 'DetectionModel',
      holders: [
        { kind: 'variable', name: 'model', path: 'model.trainer.ema.ema' },
        { kind: 'variable', name: 'x', path: 'x' }
      ]
    });
    model.apply({
      ...c01Inventory(),
      models: [c01Inventory().models[1], ...layers, ema]
    });
    expect(
      Notification.manager.notifications.filter(t =>
        t.message.startsWith('Stacked')
      )
    ).toEqual([]);
    notifier.dispose();
  });

  it('below toastMinMiB: no toast (the panel still lists the finding)', () => {
    const { model, notifier } = setup({ toastMinMiB: 64 });
    model.apply(c01Inventory());
    expect(Notification.manager.notifications).toEqual([]);
    notifier.dispose();
  });
});
