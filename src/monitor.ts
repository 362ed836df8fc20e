/**
 * The GPU monitor behind {@link IGpuMonitor}: one model and one agent
 * connection per kernel, following the notebooks of the application.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel, ServerConnection } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';
import { AgentConnection } from './connection';
import { GpuKernelModel } from './model';
import { loadServerDevices } from './server-devices-loader';
import { ServerKernels } from './server-kernels';
import { DEFAULT_SETTINGS, IGpuMonitor, IGpuSettings } from './tokens';

/**
 * Implementation of {@link IGpuMonitor}.
 */
export class GpuMonitor implements IGpuMonitor, IDisposable {
  constructor(options: GpuMonitor.IOptions) {
    this._tracker = options.tracker;
    this._onDropped = options.onDropped;
    this._serverKernels = new ServerKernels({
      serverSettings: options.serverSettings
    });
    this._serverKernels.changed.connect(this._onServerAnswer, this);
    // Between cells the device's figures and whether a kernel's process still
    // lives come from the server (issue 40): asked while a ready kernel is
    // shown and the page is visible; never the kernel itself.
    this._serverPoll = options.serverSettings
      ? new Poll({
          factory: () => this._readServer(),
          frequency: {
            interval: Private.serverInterval(this._settings.sampleIntervalMs),
            backoff: true,
            max: 60_000
          },
          // rests while no shown kernel is ready, and while the page is hidden
          standby: () =>
            this.models.some(m => m.status === 'ready') ? 'when-hidden' : true
        })
      : null;
    this._tracker.widgetAdded.connect(this._onWidgetAdded, this);
    this._tracker.currentChanged.connect(this._updateCurrent, this);
    this._tracker.forEach(panel => this._onWidgetAdded(this._tracker, panel));
    this._updateCurrent();
  }

  get currentModel(): GpuKernelModel | null {
    return this._current;
  }

  get currentChanged(): ISignal<this, GpuKernelModel | null> {
    return this._currentChanged;
  }

  get modelAdded(): ISignal<this, GpuKernelModel> {
    return this._modelAdded;
  }

  get models(): ReadonlyArray<GpuKernelModel> {
    return [...this._entries.values()].map(e => e.model);
  }

  get settings(): IGpuSettings {
    return this._settings;
  }

  get settingsChanged(): ISignal<this, IGpuSettings> {
    return this._settingsChanged;
  }

  get serverKernels(): ServerKernels {
    return this._serverKernels;
  }

  askForFigures(model: GpuKernelModel): void {
    // what says how old the figures are, for the view being opened
    void loadServerDevices().catch(() => undefined);
    if (model.status === 'ready' && !model.serverSeesDevices) {
      for (const entry of this._entries.values()) {
        if (entry.model === model) {
          entry.connection.requestSample();
        }
      }
    }
    void this._serverKernels.refresh(0);
  }

  get currentSessionContext(): ISessionContext | null {
    return this._tracker.currentWidget?.sessionContext ?? null;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * What the extension holds in this page right now, for leak checks (the
   * Galata tests read it after restarts, kernel changes and closed
   * notebooks; Lumino signals have no public count of their connections, so
   * the connecting code counts them). Not part of {@link IGpuMonitor}.
   */
  debugCounts(): GpuMonitor.IDebugCounts {
    return {
      entries: this._entries.size,
      models: GpuKernelModel.liveCount(),
      sessionSlots: this._sessionSlots,
      ...AgentConnection.liveCounts()
    };
  }

  /**
   * Load the settings and follow their changes (called once by the plugin).
   * Without a registry the defaults stay in force.
   */
  async loadSettings(
    registry: ISettingRegistry | null,
    pluginId: string
  ): Promise<void> {
    if (!registry) {
      return;
    }
    const settings = await registry.load(pluginId);
    this._settingObject = settings;
    this._applySettings(settings);
    settings.changed.connect(this._applySettings, this);
  }

  async setSetting<K extends keyof IGpuSettings>(
    key: K,
    value: IGpuSettings[K]
  ): Promise<void> {
    if (!this._settingObject) {
      this._settings = { ...this._settings, [key]: value };
      for (const entry of this._entries.values()) {
        entry.connection.setProvenance(this._settings.recordOrigins);
      }
      this._settingsChanged.emit(this._settings);
      return;
    }
    await this._settingObject.set(key, value as any);
  }

  panelFor(model: GpuKernelModel): NotebookPanel | null {
    const current = this._tracker.currentWidget;
    if (current && this._kernelOf(current)?.id === model.kernelId) {
      return current;
    }
    return (
      this._tracker.find(p => this._kernelOf(p)?.id === model.kernelId) ?? null
    );
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    for (const entry of this._entries.values()) {
      entry.connection.dispose();
      entry.model.dispose();
    }
    this._entries.clear();
    this._serverPoll?.dispose();
    this._serverKernels.dispose();
    this._settingObject?.changed.disconnect(this._applySettings, this);
    Signal.clearData(this);
  }

  private _applySettings(settings: ISettingRegistry.ISettings): void {
    const composite = settings.composite as Partial<IGpuSettings>;
    const next: IGpuSettings = { ...DEFAULT_SETTINGS, ...composite };
    next.sampleIntervalMs = Math.max(250, Number(next.sampleIntervalMs));
    const intervalChanged =
      next.sampleIntervalMs !== this._settings.sampleIntervalMs;
    next.recordOrigins = next.recordOrigins === true;
    this._settings = next;
    if (intervalChanged && this._serverPoll) {
      this._serverPoll.frequency = {
        ...this._serverPoll.frequency,
        interval: Private.serverInterval(next.sampleIntervalMs)
      };
    }
    for (const entry of this._entries.values()) {
      if (intervalChanged) {
        entry.connection.configure(next.sampleIntervalMs);
      }
      entry.connection.setProvenance(next.recordOrigins);
      entry.model.maxSamples = next.maxSamples;
    }
    this._settingsChanged.emit(next);
  }

  private _onWidgetAdded(_: INotebookTracker, panel: NotebookPanel): void {
    const context = panel.sessionContext;
    const onKernel = () => {
      this._ensure(context.session?.kernel ?? null);
      this._prune();
      if (panel === this._tracker.currentWidget) {
        this._updateCurrent();
      }
    };
    context.kernelChanged.connect(onKernel);
    this._sessionSlots++;
    panel.disposed.connect(() => {
      context.kernelChanged.disconnect(onKernel);
      this._sessionSlots--;
      // Let the tracker forget the panel first.
      requestAnimationFrame(() => this._prune());
    });
    onKernel();
  }

  /** Create the entry for a kernel once (kernelChanged also fires for the first kernel). */
  private _ensure(kernel: Kernel.IKernelConnection | null): void {
    if (!kernel || this._isDisposed) {
      return;
    }
    const existing = this._entries.get(kernel.id);
    if (existing && !existing.connection.kernel.isDisposed) {
      return;
    }
    existing?.connection.dispose();
    const model =
      existing?.model ??
      new GpuKernelModel({
        kernelId: kernel.id,
        maxSamples: this._settings.maxSamples
      });
    const connection = new AgentConnection({
      kernel,
      model,
      sampleIntervalMs: this._settings.sampleIntervalMs,
      provenance: this._settings.recordOrigins,
      onDropped: this._onDropped
    });
    this._entries.set(kernel.id, { model, connection });
    if (!existing) {
      // Who the pids NVML lists are: asked of the server when the answer is old.
      model.gpuProcessesChanged.connect(this._onGpuProcesses, this);
      model.outOfMemory.connect(this._onGpuProcesses, this);
      this._modelAdded.emit(model);
    }
  }

  /**
   * Drop entries whose kernel no open notebook uses any more. An entry whose
   * kernel connection went away with its notebook while another notebook
   * still shares that kernel moves to that notebook's connection (same model).
   */
  private _prune(): void {
    const used = new Map<string, Kernel.IKernelConnection>();
    this._tracker.forEach(panel => {
      const kernel = this._kernelOf(panel);
      if (kernel && !kernel.isDisposed && !used.has(kernel.id)) {
        used.set(kernel.id, kernel);
      }
    });
    for (const [id, entry] of this._entries) {
      const kernel = used.get(id);
      if (!kernel) {
        entry.connection.dispose();
        entry.model.dispose();
        this._entries.delete(id);
      } else if (entry.connection.kernel.isDisposed) {
        this._ensure(kernel);
      }
    }
  }

  private _onGpuProcesses(): void {
    void this._serverKernels.refresh();
  }

  private async _readServer(): Promise<void> {
    const state = await this._serverKernels.refresh(0);
    if (state.status === 'error') {
      throw new Error(state.detail); // the poll backs off
    }
  }

  /**
   * A new answer of the server: the device's figures for each kernel it sees
   * (composed samples), and the kernels whose process it says has exited.
   */
  private _onServerAnswer(): void {
    const state = this._serverKernels.state;
    if (state.status !== 'ok') {
      return;
    }
    if (state.answer.devices && !this._composer) {
      // the composition comes in a chunk of its own, with the first devices
      loadServerDevices().then(
        composer => {
          this._composer = composer;
          this._onServerAnswer();
        },
        () => undefined // not loaded: the next answer tries again
      );
    }
    const { answer } = state;
    for (const entry of this._entries.values()) {
      const { model, connection } = entry;
      if (answer.devices && this._composer) {
        model.applyServerReading(answer.devices, this._composer);
      }
      const row = answer.kernels.find(k => k.id === model.kernelId);
      const pid = model.hello?.pid ?? null;
      const known = this._pids.get(model.kernelId);
      if (row && row.pid !== null) {
        this._pids.set(model.kernelId, row.pid);
      } else if (
        row &&
        pid !== null &&
        known === pid &&
        model.status === 'ready' &&
        ['idle', 'busy'].includes(connection.kernel.status)
      ) {
        // The process the agent said it runs in (its hello) has exited, and
        // JupyterLab's restarter has not noticed yet (it polls every 3 s).
        this._pids.delete(model.kernelId);
        model.setDead('exited');
      }
    }
  }

  private _updateCurrent(): void {
    const panel = this._tracker.currentWidget;
    const kernel = panel ? this._kernelOf(panel) : null;
    if (kernel) {
      this._ensure(kernel);
    }
    const model = kernel ? (this._entries.get(kernel.id)?.model ?? null) : null;
    if (model !== this._current) {
      this._current = model;
      this._currentChanged.emit(model);
    }
  }

  private _kernelOf(panel: NotebookPanel): Kernel.IKernelConnection | null {
    return panel.sessionContext.session?.kernel ?? null;
  }

  private _tracker: INotebookTracker;
  private _onDropped?: (model: GpuKernelModel, reason: string) => void;
  private _serverKernels: ServerKernels;
  private _serverPoll: Poll | null;
  private _composer: GpuKernelModel.IServerComposer | null = null;
  /** The pid the server last listed for each kernel. */
  private _pids = new Map<string, number>();
  private _entries = new Map<
    string,
    { model: GpuKernelModel; connection: AgentConnection }
  >();
  private _current: GpuKernelModel | null = null;
  private _settings: IGpuSettings = { ...DEFAULT_SETTINGS };
  private _settingObject: ISettingRegistry.ISettings | null = null;
  private _isDisposed = false;
  private _sessionSlots = 0;
  private _currentChanged = new Signal<this, GpuKernelModel | null>(this);
  private _modelAdded = new Signal<this, GpuKernelModel>(this);
  private _settingsChanged = new Signal<this, IGpuSettings>(this);
}

/** Module-private helpers. */
namespace Private {
  /**
   * How often the server is asked for the device's figures (ms): the
   * sampler's period, at least a second (a request costs the server one
   * NVML pass and one pass over its kernels).
   */
  export function serverInterval(sampleIntervalMs: number): number {
    return Math.max(1000, sampleIntervalMs);
  }
}

/** GpuMonitor statics. */
export namespace GpuMonitor {
  /** Constructor options. */
  export interface IOptions {
    /** The notebooks to follow. */
    tracker: INotebookTracker;
    /** Called when a kernel message is dropped by validation (logged once per kernel). */
    onDropped?: (model: GpuKernelModel, reason: string) => void;
    /**
     * The app's server settings (`serviceManager.serverSettings`), for the
     * server's kernel list; without them no kernel is attributed.
     */
    serverSettings?: ServerConnection.ISettings;
  }

  /** What {@link GpuMonitor.debugCounts} returns. */
  export interface IDebugCounts extends AgentConnection.ILiveCounts {
    /** Kernels the monitor keeps a model and a connection for. */
    entries: number;
    /** Kernel models created in this page and not disposed. */
    models: number;
    /** Slots the monitor connected to notebooks' `kernelChanged` and not disconnected. */
    sessionSlots: number;
  }
}
