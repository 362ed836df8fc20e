/**
 * Starts the toasts when the monitor's first kernel model appears.
 *
 * The notifier and its rules (`./index`: the toasts' texts, the findings, the
 * leak trend, the OOM diagnosis) are a chunk of their own that JupyterLab's
 * start does not load. The loader is on the start path: it follows the
 * monitor from the beginning, asks for the chunk when the first kernel model
 * is added, keeps what the models signal until the chunk is there, and then
 * creates the {@link GpuNotifier} with that backlog, in order. In practice the
 * backlog is the model's first status changes: the agent's messages need the
 * agent's own chunk and a round trip to the kernel first.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';
import type { ISignal, Slot } from '@lumino/signaling';
import type { GpuKernelModel } from '../model';
import type { ICleaned, IInventory, IOom } from '../protocol';
import type { IGpuMonitor } from '../tokens';
import type * as Toasts from './index';
import type { GpuNotifier } from './index';

/** Events kept while the chunk loads, at most; beyond, they are dropped (and said once). */
const MAX_BACKLOG = 10_000;

/**
 * Loads the toasts' chunk when the first kernel model appears and creates
 * the notifier; see the module comment.
 */
export class NotifierLoader implements IDisposable {
  constructor(options: NotifierLoader.IOptions) {
    this._options = options;
    const { monitor } = options;
    monitor.modelAdded.connect(this._onModelAdded, this);
    monitor.settingsChanged.connect(this._onSettings, this);
    monitor.models.forEach(model => this._onModelAdded(monitor, model));
  }

  /** The notifier, once its chunk is loaded (null before). */
  get notifier(): GpuNotifier | null {
    return this._notifier;
  }

  /** Whether disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Stop following the monitor; dispose the notifier if it was created. */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._disconnect();
    this._notifier?.dispose();
    this._notifier = null;
  }

  private _onModelAdded(_: IGpuMonitor, model: GpuKernelModel): void {
    if (this._watched.has(model)) {
      return;
    }
    this._watched.add(model);
    for (const [signal, slot] of this._modelSlots(model)) {
      signal.connect(slot, this);
    }
    this._load();
  }

  /** Ask for the chunk (once at a time; after a failure, at the next model). */
  private _load(): void {
    if (this._loading || this._isDisposed) {
      return;
    }
    this._loading = true;
    const load = this._options.load ?? (() => import('./index'));
    load().then(
      module => {
        if (this._isDisposed) {
          return;
        }
        const backlog = this._backlog;
        this._disconnect();
        const { monitor, commands, trans } = this._options;
        this._notifier = new module.GpuNotifier({
          monitor,
          commands,
          trans,
          backlog
        });
      },
      reason => {
        this._loading = false;
        console.error(
          'jupyterlab-gpu-hygiene: the toasts could not be loaded; trying again with the next kernel',
          reason
        );
      }
    );
  }

  /** The model signals the loader records: connected and disconnected from this one list. */
  private _modelSlots(
    model: GpuKernelModel
  ): Array<[ISignal<GpuKernelModel, any>, Slot<GpuKernelModel, any>]> {
    return [
      [model.inventoryChanged, this._onInventory],
      [model.changed, this._onChanged],
      [model.cleaned, this._onCleaned],
      [model.outOfMemory, this._onOutOfMemory],
      [model.disposed, this._onDisposed]
    ];
  }

  private _onInventory(model: GpuKernelModel, inventory: IInventory): void {
    this._keep({ kind: 'inventory', model, inventory });
  }

  private _onChanged(model: GpuKernelModel): void {
    const last = this._backlog[this._backlog.length - 1];
    // The rules read a model's state when they are asked: a second change
    // in a row asks them nothing new.
    if (last?.kind !== 'changed' || last.model !== model) {
      this._keep({ kind: 'changed', model });
    }
  }

  private _onCleaned(model: GpuKernelModel, cleaned: ICleaned): void {
    this._keep({ kind: 'cleaned', model, cleaned });
  }

  private _onOutOfMemory(model: GpuKernelModel, oom: IOom): void {
    this._keep({ kind: 'outOfMemory', model, oom });
  }

  private _onDisposed(model: GpuKernelModel): void {
    for (const [signal, slot] of this._modelSlots(model)) {
      signal.disconnect(slot, this);
    }
    this._watched.delete(model);
    this._keep({ kind: 'disposed', model });
  }

  private _onSettings(): void {
    this._keep({ kind: 'settings' });
  }

  private _keep(event: GpuNotifier.IEvent): void {
    if (this._backlog.length < MAX_BACKLOG) {
      this._backlog.push(event);
    } else if (!this._overflowed) {
      this._overflowed = true;
      console.warn(
        `jupyterlab-gpu-hygiene: ${MAX_BACKLOG} kernel events arrived before the toasts were loaded; later ones are not replayed`
      );
    }
  }

  /** Disconnect every slot and forget the backlog (the notifier takes over). */
  private _disconnect(): void {
    const { monitor } = this._options;
    monitor.modelAdded.disconnect(this._onModelAdded, this);
    monitor.settingsChanged.disconnect(this._onSettings, this);
    for (const model of this._watched) {
      for (const [signal, slot] of this._modelSlots(model)) {
        signal.disconnect(slot, this);
      }
    }
    this._watched.clear();
    this._backlog = [];
  }

  private _options: NotifierLoader.IOptions;
  private _notifier: GpuNotifier | null = null;
  private _watched = new Set<GpuKernelModel>();
  private _backlog: GpuNotifier.IEvent[] = [];
  private _loading = false;
  private _overflowed = false;
  private _isDisposed = false;
}

/** NotifierLoader statics. */
export namespace NotifierLoader {
  /** Constructor options: those of the notifier, and how its chunk is loaded. */
  export interface IOptions {
    /** The monitor to follow. */
    monitor: IGpuMonitor;
    /** Commands run by the toast buttons, and whose captions they show. */
    commands: CommandRegistry;
    /** Translations. */
    trans: TranslationBundle;
    /** Loads the toasts' module (default: the dynamic `import('./index')`; tests pass their own). */
    load?: () => Promise<typeof Toasts>;
  }
}
