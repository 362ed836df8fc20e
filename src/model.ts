/**
 * Per-kernel state: the agent's hello, a bounded ring buffer of samples, the
 * latest inventory, a record of each cell's inventory, the last clean result,
 * the last CUDA out-of-memory report and the last list of the GPU's
 * processes (NVML). Views read it; only the kernel connection writes it.
 */
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';
import { cellMark, ICellMark } from './analysis/cells/cell-history';
import type * as ServerDevices from './server-devices';
import type { IServerDevices } from './server-kernel-types';
import type {
  IAgentError,
  ICleaned,
  IDeviceSample,
  IGpuProcesses,
  IHello,
  IInventory,
  ILimit,
  IOom,
  ISample,
  KernelMessage
} from './protocol';

/** Where the connection to the kernel's agent stands. */
export type AgentStatus =
  | 'starting' // waiting for the kernel or the agent's hello
  | 'ready' // the agent answered; figures flow
  | 'restarting' // the kernel is restarting; the agent will be sent again
  | 'dead' // the kernel died
  | 'unsupported' // not a Python kernel: nothing is sent to it
  | 'failed'; // the agent could not be installed (see `failure`)

/**
 * Why a model's status is `dead`:
 * - `died`: JupyterLab reports the kernel dead (an automatic restart failed,
 *   or it was shut down elsewhere);
 * - `restarting`: the kernel process died and JupyterLab is restarting it
 *   (the server's restarter noticed it; its variables are gone);
 * - `exited`: the server reports that the kernel's process has exited
 *   (killed from outside, e.g. by the out-of-memory killer) before
 *   JupyterLab's restarter noticed it (it polls every 3 s). Undone by the
 *   next message from the agent.
 */
export type DeadReason = 'died' | 'restarting' | 'exited';

/**
 * State of one kernel as reported by its agent.
 */
export class GpuKernelModel implements IDisposable {
  constructor(options: GpuKernelModel.IOptions) {
    this.kernelId = options.kernelId;
    this._maxSamples = Private.clampSamples(options.maxSamples);
    Private.live.count++;
  }

  /** Id of the kernel this model describes. */
  readonly kernelId: string;

  /** Connection status. */
  get status(): AgentStatus {
    return this._status;
  }

  /** Why the agent could not be installed, when `status` is `failed`. */
  get failure(): string | null {
    return this._failure;
  }

  /** Why the kernel counts as dead, when `status` is `dead`; else null. */
  get deadReason(): DeadReason | null {
    return this._status === 'dead' ? this._deadReason : null;
  }

  /** The kernel's language when it is not supported (e.g. `"R"`). */
  get language(): string | null {
    return this._language;
  }

  /** The agent's `hello`, or null before it arrived. */
  get hello(): IHello | null {
    return this._hello;
  }

  /** Latest sample, or null. */
  get latestSample(): ISample | null {
    return this._samples.length
      ? this._samples[this._samples.length - 1]
      : null;
  }

  /**
   * Whether the server's NVML reads every device of this kernel: then the
   * device's figures between cells come from the server (samples composed by
   * the page, `server-devices.ts`); else only from the kernel, when a user
   * asks (opening the gauge's popup or the panel).
   */
  get serverSeesDevices(): boolean {
    return this._serverSees;
  }

  /** Samples, oldest first, at most `maxSamples`. */
  get samples(): ReadonlyArray<ISample> {
    return this._samples;
  }

  /**
   * Size of the sample ring buffer (default 3600: an hour at one sample a
   * second). Setting it applies at once: the oldest samples are dropped.
   */
  get maxSamples(): number {
    return this._maxSamples;
  }
  set maxSamples(value: number) {
    const next = Private.clampSamples(value);
    if (next === this._maxSamples) {
      return;
    }
    this._maxSamples = next;
    if (this._samples.length > next) {
      this._samples.splice(0, this._samples.length - next);
      this._changed.emit();
    }
  }

  /**
   * One record per inventory (after each cell, and on request), oldest first,
   * at most {@link GpuKernelModel.MAX_CELLS}: when it came and which models
   * were alive. The per-cell table and the leak trend are computed from these
   * and the samples.
   */
  get cells(): ReadonlyArray<ICellMark> {
    return this._cells;
  }

  /** Latest inventory, or null. */
  get inventory(): IInventory | null {
    return this._inventory;
  }

  /**
   * The limits of the kernel's environment (what the agent degrades from,
   * docs/protocol.md), each once: the hello's (known at start) and the latest
   * inventory's (the full current list), in that order; empty for an agent
   * that sends none.
   */
  get limits(): ReadonlyArray<ILimit> {
    const out: ILimit[] = [];
    for (const limit of [
      ...(this._hello?.limits ?? []),
      ...(this._inventory?.limits ?? [])
    ]) {
      if (
        !out.some(
          l =>
            l.area === limit.area &&
            l.library === limit.library &&
            l.version === limit.version
        )
      ) {
        out.push(limit);
      }
    }
    return out;
  }

  /** Result of the last clean cell, or null. */
  get lastCleaned(): ICleaned | null {
    return this._lastCleaned;
  }

  /** The last CUDA out-of-memory report of this kernel process, or null. */
  get lastOom(): IOom | null {
    return this._lastOom;
  }

  /**
   * The processes NVML listed on the kernel's devices in the agent's last
   * `gpuProcesses` message, or null (no NVML, an older agent, none yet).
   */
  get gpuProcesses(): IGpuProcesses | null {
    return this._gpuProcesses;
  }

  /** Distinct agent errors received, oldest first (bounded). */
  get agentErrors(): ReadonlyArray<IAgentError> {
    return this._agentErrors;
  }

  /** Kernel messages dropped because they failed validation. */
  get droppedMessages(): number {
    return this._dropped;
  }

  /** Emitted on any change that views render. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted for each new inventory. */
  get inventoryChanged(): ISignal<this, IInventory> {
    return this._inventoryChanged;
  }

  /** Emitted when a clean cell reported what it freed. */
  get cleaned(): ISignal<this, ICleaned> {
    return this._cleanedSignal;
  }

  /** Emitted when a cell failed with CUDA out of memory. */
  get outOfMemory(): ISignal<this, IOom> {
    return this._oomSignal;
  }

  /** Emitted for each `gpuProcesses` message (the monitor then asks the server who the pids are). */
  get gpuProcessesChanged(): ISignal<this, IGpuProcesses> {
    return this._gpuProcessesSignal;
  }

  /** Emitted once when the model is disposed (its kernel is no longer used). */
  get disposed(): ISignal<this, void> {
    return this._disposed;
  }

  /** Whether the model was disposed. */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * The device the gauge shows: the one where this kernel uses the most
   * memory (process figure, then torch reserved), else the first one.
   */
  primaryDevice(): IDeviceSample | null {
    const devices = this.latestSample?.devices ?? [];
    if (!devices.length) {
      return null;
    }
    const weight = (d: IDeviceSample) => (d.process ?? 0) + (d.reserved ?? 0);
    return devices.reduce((best, d) => (weight(d) > weight(best) ? d : best));
  }

  /**
   * Set the connection status (connection only).
   *
   * @param detail - the failure for `failed`, the kernel language for
   *   `unsupported`; ignored otherwise. `dead` set here means `died`
   *   (see {@link setDead}).
   */
  setStatus(status: AgentStatus, detail: string | null = null): void {
    this._update(status, detail, 'died');
  }

  /** The kernel is dead, for `reason` (connection only). */
  setDead(reason: DeadReason): void {
    this._update('dead', null, reason);
  }

  /**
   * The server's NVML reading came (monitor only): between cells, a sample composed of this kernel's last own
   * figures and the device's figures the server read is added (see
   * `composeSample`), so the gauge and the chart stay live while the idle
   * kernel is silent; so is the list of the GPU's processes
   * (`composeGpuProcesses`). `compose`: src/server-devices.ts, which the
   * monitor loads in a chunk of its own.
   */
  applyServerReading(
    reading: IServerDevices,
    compose: GpuKernelModel.IServerComposer
  ): void {
    const { composeGpuProcesses, composeSample, serverSeesKernel } = compose;
    const sees = serverSeesKernel(this._hello, reading);
    const last = this.latestSample;
    const composed =
      this._status === 'ready' && last && this._hello
        ? composeSample(last, this._hello, reading)
        : null;
    if (composed) {
      this._push(composed);
    }
    const listed =
      composed && this._hello
        ? composeGpuProcesses(this._gpuProcesses, this._hello, reading)
        : null;
    if (listed) {
      // not `gpuProcessesChanged`: that one is the agent's list
      this._gpuProcesses = listed;
    }
    if (composed || sees !== this._serverSees) {
      this._serverSees = sees;
      this._changed.emit();
    }
  }

  /** Count a kernel message that failed validation (connection only). */
  countDropped(): void {
    this._dropped++;
  }

  /** Apply a validated kernel message (connection only). */
  apply(message: KernelMessage): void {
    switch (message.type) {
      case 'hello':
        this._hello = message;
        this._status = 'ready';
        break;
      case 'sample':
        this._push(message);
        break;
      case 'inventory':
        this._inventory = message;
        this._cells.push(cellMark(message));
        if (this._cells.length > GpuKernelModel.MAX_CELLS) {
          this._cells.shift();
        }
        this._inventoryChanged.emit(message);
        break;
      case 'cleaned':
        this._lastCleaned = message;
        this._cleanedSignal.emit(message);
        break;
      case 'oom':
        this._lastOom = message;
        this._oomSignal.emit(message);
        break;
      case 'gpuProcesses':
        this._gpuProcesses = message;
        this._gpuProcessesSignal.emit(message);
        break;
      case 'error':
        if (
          !this._agentErrors.some(
            e => e.where === message.where && e.message === message.message
          )
        ) {
          this._agentErrors.push(message);
          if (this._agentErrors.length > 20) {
            this._agentErrors.shift();
          }
        }
        break;
    }
    this._changed.emit();
  }

  /**
   * Forget what the previous kernel process reported (after a restart),
   * its agent errors included; the count of dropped messages is kept.
   */
  resetKernelState(): void {
    this._agentErrors = [];
    this._hello = null;
    this._inventory = null;
    this._lastCleaned = null;
    this._lastOom = null;
    this._gpuProcesses = null;
    this._serverSees = false;
    this._samples = [];
    this._cells = [];
    this._changed.emit();
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    Private.live.count--;
    this._disposed.emit();
    Signal.clearData(this);
  }

  private _push(sample: ISample): void {
    this._samples.push(sample);
    if (this._samples.length > this._maxSamples) {
      this._samples.splice(0, this._samples.length - this._maxSamples);
    }
  }

  private _update(
    status: AgentStatus,
    detail: string | null,
    deadReason: DeadReason
  ): void {
    const failure = status === 'failed' ? detail : null;
    const language = status === 'unsupported' ? detail : this._language;
    const reason = status === 'dead' ? deadReason : this._deadReason;
    if (
      status === this._status &&
      failure === this._failure &&
      language === this._language &&
      reason === this._deadReason
    ) {
      return;
    }
    this._status = status;
    this._failure = failure;
    this._language = language;
    this._deadReason = reason;
    this._changed.emit();
  }

  private _status: AgentStatus = 'starting';
  private _failure: string | null = null;
  private _deadReason: DeadReason = 'died';
  private _language: string | null = null;
  private _hello: IHello | null = null;
  private _samples: ISample[] = [];
  private _serverSees = false;
  private _cells: ICellMark[] = [];
  private _inventory: IInventory | null = null;
  private _lastCleaned: ICleaned | null = null;
  private _lastOom: IOom | null = null;
  private _gpuProcesses: IGpuProcesses | null = null;
  private _agentErrors: IAgentError[] = [];
  private _dropped = 0;
  private _maxSamples: number;
  private _isDisposed = false;
  private _changed = new Signal<this, void>(this);
  private _inventoryChanged = new Signal<this, IInventory>(this);
  private _cleanedSignal = new Signal<this, ICleaned>(this);
  private _oomSignal = new Signal<this, IOom>(this);
  private _gpuProcessesSignal = new Signal<this, IGpuProcesses>(this);
  private _disposed = new Signal<this, void>(this);
}

/** GpuKernelModel statics. */
export namespace GpuKernelModel {
  /** Constructor options. */
  export interface IOptions {
    /** Kernel id. */
    kernelId: string;
    /** Ring buffer size for samples (default 3600). */
    maxSamples?: number;
  }

  /** What composes samples from the server's reading (src/server-devices.ts). */
  export type IServerComposer = Pick<
    typeof ServerDevices,
    'composeSample' | 'composeGpuProcesses' | 'serverSeesKernel'
  >;

  /** Most inventory records kept in {@link GpuKernelModel.cells}. */
  export const MAX_CELLS = 1000;

  /**
   * Models created and not yet disposed in this page (a leak check for
   * tests, read through `GpuMonitor.debugCounts()`).
   */
  export function liveCount(): number {
    return Private.live.count;
  }
}

/** Module-private helpers. */
namespace Private {
  /** Models created and not yet disposed. */
  export const live = { count: 0 };

  /** A ring buffer size: a positive integer, 3600 when not a number. */
  export function clampSamples(value: number | undefined): number {
    const n = Number(value ?? 3600);
    return Number.isFinite(n) ? Math.max(1, Math.floor(n)) : 3600;
  }
}
