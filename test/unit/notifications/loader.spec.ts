/**
 * NotifierLoader (src/notifications/toast-loader.ts): the toasts' chunk is
 * asked for when the first kernel model appears, never before; what the models
 * signalled while it loaded raises the toasts a notifier there from the start
 * would have raised; a failed load is tried again with the next model.
 */
import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import { GpuKernelModel } from '../../../src/model';
import * as toasts from '../../../src/notifications';
import { NotifierLoader } from '../../../src/notifications/toast-loader';
import {
  DEFAULT_SETTINGS,
  IGpuMonitor,
  IGpuSettings
} from '../../../src/tokens';
import {
  c01Inventory,
  c08Inventory,
  FakeServerKernels,
  oomMessage
} from '../fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

/** A monitor whose models are added by the test. */
class Monitor implements IGpuMonitor {
  readonly currentChanged: Signal<IGpuMonitor, GpuKernelModel | null> =
    new Signal(this);
  readonly modelAdded: Signal<IGpuMonitor, GpuKernelModel> = new Signal(this);
  readonly settingsChanged: Signal<IGpuMonitor, IGpuSettings> = new Signal(
    this
  );
  settings: IGpuSettings = { ...DEFAULT_SETTINGS };
  currentSessionContext = null;
  askForFigures(): void {
    // a user's action: not part of these tests
  }
  serverKernels = new FakeServerKernels();
  list: GpuKernelModel[] = [];
  get currentModel(): GpuKernelModel | null {
    return this.list[0] ?? null;
  }
  get models(): GpuKernelModel[] {
    return this.list;
  }
  add(model: GpuKernelModel): void {
    this.list.push(model);
    this.modelAdded.emit(model);
  }
  async setSetting<K extends keyof IGpuSettings>(
    key: K,
    value: IGpuSettings[K]
  ): Promise<void> {
    this.settings = { ...this.settings, [key]: value };
    this.settingsChanged.emit(this.settings);
  }
  panelFor(): null {
    return null;
  }
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await new Promise(resolve => setTimeout(resolve, 0));
  }
}

/** The toasts on screen, as type and message. */
const shown = () =>
  Notification.manager.notifications.map(n => `${n.type}: ${n.message}`).sort();

/** What a kernel goes through in these tests: stacked models, then an OOM. */
function story(model: GpuKernelModel): void {
  model.setStatus('starting');
  model.apply(c01Inventory());
  model.apply(oomMessage());
  model.apply(c08Inventory());
}

afterEach(() => {
  Notification.dismiss();
});

describe('NotifierLoader', () => {
  it('asks for the toasts only when the first kernel model appears, once', async () => {
    const monitor = new Monitor();
    const load = jest.fn(() => Promise.resolve(toasts));
    const loader = new NotifierLoader({
      monitor,
      commands: new CommandRegistry(),
      trans,
      load
    });
    monitor.settingsChanged.emit(monitor.settings);
    await settle();
    expect(load).not.toHaveBeenCalled();
    expect(loader.notifier).toBeNull();

    monitor.add(new GpuKernelModel({ kernelId: 'k1' }));
    monitor.add(new GpuKernelModel({ kernelId: 'k2' }));
    expect(load).toHaveBeenCalledTimes(1);
    await settle();
    expect(loader.notifier).not.toBeNull();
    monitor.add(new GpuKernelModel({ kernelId: 'k3' }));
    expect(load).toHaveBeenCalledTimes(1);
    loader.dispose();
    expect(loader.notifier).toBeNull();
  });

  it('what a model signalled while the chunk loaded raises the toasts a notifier from the start would have', async () => {
    // Reference: the notifier there from the start.
    const reference = new Monitor();
    const direct = new toasts.GpuNotifier({
      monitor: reference,
      commands: new CommandRegistry(),
      trans
    });
    const first = new GpuKernelModel({ kernelId: 'k1' });
    reference.add(first);
    story(first);
    const expected = shown();
    expect(expected.length).toBeGreaterThanOrEqual(2); // stacked models, the OOM
    direct.dispose();
    Notification.dismiss();

    const monitor = new Monitor();
    const arrival = deferred<typeof toasts>();
    const loader = new NotifierLoader({
      monitor,
      commands: new CommandRegistry(),
      trans,
      load: () => arrival.promise
    });
    const model = new GpuKernelModel({ kernelId: 'k1' });
    monitor.add(model);
    story(model);
    expect(shown()).toEqual([]);
    arrival.resolve(toasts);
    await settle();
    expect(shown()).toEqual(expected);

    // From now on the notifier follows the model itself, and nothing twice:
    // the same inventory changes nothing, a new OOM adds one toast.
    model.apply({ ...c08Inventory(), seq: 9 });
    expect(shown()).toEqual(expected);
    model.apply(oomMessage({ executionCount: 8 }));
    expect(shown()).toHaveLength(expected.length + 1);
    loader.dispose();
  });

  it('a model gone before the chunk arrived leaves no state toast, its OOM stays', async () => {
    const monitor = new Monitor();
    const arrival = deferred<typeof toasts>();
    const loader = new NotifierLoader({
      monitor,
      commands: new CommandRegistry(),
      trans,
      load: () => arrival.promise
    });
    const model = new GpuKernelModel({ kernelId: 'k1' });
    monitor.add(model);
    story(model);
    monitor.list = [];
    model.dispose();
    arrival.resolve(toasts);
    await settle();
    const left = shown();
    expect(left).toHaveLength(1);
    expect(left[0]).toMatch(/^error: /); // the OOM report
    loader.dispose();
  });

  it('a chunk that cannot be loaded is tried again with the next kernel model', async () => {
    const error = jest.spyOn(console, 'error').mockImplementation(() => {});
    const monitor = new Monitor();
    const load = jest
      .fn<Promise<typeof toasts>, []>()
      .mockImplementationOnce(() => Promise.reject(new Error('offline')))
      .mockImplementation(() => Promise.resolve(toasts));
    const loader = new NotifierLoader({
      monitor,
      commands: new CommandRegistry(),
      trans,
      load
    });
    const first = new GpuKernelModel({ kernelId: 'k1' });
    monitor.add(first);
    await settle();
    expect(loader.notifier).toBeNull();
    expect(error).toHaveBeenCalledTimes(1);
    first.apply(c01Inventory());

    monitor.add(new GpuKernelModel({ kernelId: 'k2' }));
    await settle();
    expect(load).toHaveBeenCalledTimes(2);
    expect(loader.notifier).not.toBeNull();
    // k1's stacked models, kept meanwhile, are warned about.
    expect(shown().filter(t => t.startsWith('warning: '))).toHaveLength(1);
    error.mockRestore();
    loader.dispose();
  });
});
