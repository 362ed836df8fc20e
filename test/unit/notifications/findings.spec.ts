import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { findings } from '../../../src/analysis/findings';
import { GpuKernelModel } from '../../../src/model';
import { GpuNotifier } from '../../../src/notifications';
import { findingsToToast } from '../../../src/notifications/finding-toast';
import type { IInventory } from '../../../src/protocol';
import { DEFAULT_SETTINGS } from '../../../src/tokens';
import {
  c01Inventory,
  gpuSample,
  held,
  OneModelMonitor,
  yolo
} from '../fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;

/** An inventory with nothing but `roots` and `models` on cuda:0. */
function cuda(extra: Partial<IInventory>): IInventory {
  return {
    ...c01Inventory(),
    cudaInitialized: true,
    models: [],
    roots: [],
    ...extra
  };
}

const traceback = (mib: number) =>
  cuda({
    roots: [
      {
        kind: 'traceback',
        name: 'last traceback (step)',
        bytes: { 'cuda:0': mib * MiB },
        models: 0,
        tensors: 1
      }
    ]
  });

describe('findings toast', () => {
  afterEach(() => Notification.dismiss());

  function setup(settings = {}) {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model, settings);
    const commands = new CommandRegistry();
    const calls: Array<[string, unknown]> = [];
    for (const id of [
      'gpu-hygiene:clean',
      'gpu-hygiene:open-panel',
      'gpu-hygiene:free-model',
      'gpu-hygiene:drop-trainer'
    ]) {
      commands.addCommand(id, {
        label: id === 'gpu-hygiene:clean' ? 'Clean GPU' : 'Open',
        execute: args => void calls.push([id, args])
      });
    }
    const notifier = new GpuNotifier({ monitor, commands, trans });
    return { model, monitor, notifier, calls };
  }
  const toasts = () => Notification.manager.notifications;

  it('one warning per kind, updated in place, with the fix (Clean GPU clears the traceback)', () => {
    const { model, notifier, calls } = setup();
    model.apply(traceback(256));
    expect(toasts().map(t => t.message)).toEqual([
      'The last exception keeps its frames and their tensors alive: 256.0 MiB. Clean GPU clears the last traceback.'
    ]);
    expect(toasts()[0].options.actions?.map(a => a.label)).toEqual([
      'Clean GPU',
      'Open VRAM panel',
      "Don't warn again"
    ]);
    toasts()[0].options.actions?.[0].callback(new MouseEvent('click'));
    expect(calls).toEqual([['gpu-hygiene:clean', { kernelId: 'k1' }]]);
    model.apply(traceback(300));
    expect(toasts()).toHaveLength(1);
    expect(toasts()[0].message).toContain('300.0 MiB');
    model.apply(traceback(0));
    expect(toasts()).toHaveLength(0);
    notifier.dispose();
  });

  it('a lone stale model (not a stack): its own warning, freed by its own plan', () => {
    const { model, notifier, calls } = setup();
    // a YOLOv8x-sized stale model: a warning on the one scale (≥ 64 MiB here)
    const stale = yolo({
      bytes: { 'cuda:0': 512 * MiB },
      holders: [held('output', 'Out[2]'), held('output', '_2')],
      stale: true
    });
    model.apply(cuda({ models: [stale] }));
    const messages = toasts().map(t => t.message);
    expect(messages).toEqual([
      'No variable names YOLO (yolov8n.yaml) (512.0 MiB) any more; only Out[2], _2 keeps it alive. Clean GPU frees it.'
    ]);
    toasts()[0].options.actions?.[0].callback(new MouseEvent('click'));
    expect(calls).toEqual([
      ['gpu-hygiene:free-model', { kernelId: 'k1', modelId: stale.id }]
    ]);
    notifier.dispose();
  });

  it('a finding below toastMinMiB gives no toast but is listed', () => {
    const { model, notifier } = setup({ toastMinMiB: 512 });
    model.apply(traceback(256));
    expect(toasts()).toHaveLength(0);
    expect(
      findings({ inventory: traceback(256), sample: null, hello: null })
    ).toHaveLength(1);
    notifier.dispose();
    const small = setup();
    small.model.apply(traceback(0.5));
    expect(toasts()).toHaveLength(0);
    small.notifier.dispose();
  });

  it('a warning no command fixes offers the panel, never Clean GPU', () => {
    const { model, notifier } = setup();
    model.apply(
      cuda({
        models: [
          yolo({
            className: 'Net',
            family: 'torch',
            module: '__main__',
            label: 'Net',
            bytes: { 'cuda:0': 48 * MiB },
            parts: [
              {
                path: 'trainer.optimizer',
                kind: 'optimizer',
                className: 'Adam',
                bytes: { 'cuda:0': 96 * MiB }
              }
            ]
          })
        ]
      })
    );
    const [toast] = toasts();
    expect(toast.message).toBe(
      'model.trainer keeps Adam state (96.0 MiB) next to Net: 96.0 MiB.'
    );
    expect(toast.options.actions?.map(a => a.label)).toEqual([
      'Open VRAM panel',
      "Don't warn again"
    ]);
    notifier.dispose();
  });

  it('a finished YOLO training: one toast that fits, with Drop the finished trainer', () => {
    const { model, notifier, calls } = setup();
    const part = (path: string, className: string, mib: number) => ({
      path,
      kind: path.endsWith('optimizer')
        ? ('optimizer' as const)
        : ('model' as const),
      className,
      bytes: { 'cuda:0': mib * MiB }
    });
    model.apply(
      cuda({
        models: [
          yolo({
            bytes: { 'cuda:0': 48 * MiB },
            parts: [
              part('trainer.model', 'DetectionModel', 48),
              part('trainer.ema.ema', 'DetectionModel', 48),
              part('trainer.optimizer', 'AdamW', 96)
            ]
          })
        ]
      })
    );
    const [toast] = toasts();
    expect(toast.message).toBe(
      'model.trainer (finished) holds a model copy (48.0 MiB), an EMA copy (48.0 MiB), AdamW state (96.0 MiB): dropping it keeps model.'
    );
    expect(toast.message.length).toBeLessThanOrEqual(140);
    expect(toast.options.actions?.map(a => a.label)).toEqual([
      'Drop the finished trainer, keep the model',
      'Open VRAM panel',
      "Don't warn again"
    ]);
    toast.options.actions?.[0].callback(new MouseEvent('click'));
    expect(calls).toEqual([
      [
        'gpu-hygiene:drop-trainer',
        { kernelId: 'k1', modelId: '0x7f0000000001', name: 'model' }
      ]
    ]);
    notifier.dispose();
  });

  it('the layers of a collected model: one toast, Clean GPU; infos and stacks are not toasted here', () => {
    const { model, notifier } = setup();
    const layer = (i: number) =>
      yolo({
        id: `0x${i}`,
        order: i,
        className: 'Conv',
        label: 'Conv',
        bytes: { 'cuda:0': 200 * MiB },
        holders: [held('hidden', 'unreachable from the namespace')],
        stale: true
      });
    model.apply(gpuSample(8000 * MiB, 80_000 * MiB)); // CUDA context: info
    // 600 MiB of an 80,000 MiB device: a warning from 400 MiB (0.5 %)
    model.apply(cuda({ models: [layer(1), layer(2), layer(3)] }));
    expect(toasts().map(t => [t.type, t.message])).toEqual([
      [
        'warning',
        'Unreachable, waiting for garbage collection (reference cycle), 600.0 MiB: 3 modules (Conv ×3). Clean GPU runs gc.collect() and frees them.'
      ]
    ]);
    notifier.dispose();
  });

  it('findingsToToast leaves out stacks, graph holders, infos and small findings', () => {
    const list = findings({
      inventory: c01Inventory(),
      sample: null,
      hello: null
    });
    expect(list.map(f => f.kind)).toEqual(['stale-model']);
    expect(findingsToToast(list, DEFAULT_SETTINGS)).toEqual([]);
  });

  it("follows warnOnFindings; 'Don't warn again' turns it off", () => {
    const { model, monitor, notifier } = setup();
    model.apply(traceback(256));
    toasts()[0]
      .options.actions?.find(a => a.label === "Don't warn again")
      ?.callback(new MouseEvent('click'));
    expect(monitor.settings.warnOnFindings).toBe(false);
    expect(toasts()).toHaveLength(0);
    notifier.dispose();
  });
});
