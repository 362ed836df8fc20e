/**
 * The findings this page computes for each kernel, reported to the server
 * extension (`PUT {baseUrl}gpu-hygiene/kernels/<id>/findings`,
 * jupyterlab_gpu_hygiene/findings.py), so that its Prometheus metrics can say
 * per kernel what the findings say (issue 25): the server runs no code in a
 * kernel and cannot compute them itself.
 *
 * One report per kernel after its inventory changed (a second later, the
 * last of a burst), only when it differs from the last one sent; the rules
 * are loaded lazily (`loadFindings`: not on JupyterLab's start path). A
 * server without the endpoint, or that does not run the kernel (404), is not
 * asked again for that kernel; other failures are silent and the next
 * inventory tries again.
 */
import { ServerConnection } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import type { IFinding } from './analysis/findings/types';
import { loadFindings } from './analysis/findings/rules-loader';
import type { GpuKernelModel } from './model';
import type { IInventory } from './protocol';
import type { IGpuMonitor } from './tokens';

/** A report's body: bytes over all devices. */
export interface IFindingsReport {
  /** Bytes of the kernel's stale models (the agent's `stale` flag). */
  staleBytes: number;
  /** Each finding's kind, severity and bytes (all of them, under the floor too). */
  findings: Array<{
    kind: string;
    severity: 'warning' | 'info';
    bytes: number;
  }>;
}

/** Most findings in one report (the server refuses more). */
const MAX_REPORTED = 200;

const sum = (bytes: Readonly<Record<string, number>>) =>
  Object.values(bytes).reduce((a, b) => a + b, 0);

/** The report of `inventory` and the `findings` computed from it. */
export function findingsReport(
  inventory: IInventory,
  findings: ReadonlyArray<IFinding>
): IFindingsReport {
  return {
    staleBytes: inventory.models
      .filter(m => m.stale)
      .reduce((total, m) => total + sum(m.bytes), 0),
    findings: findings.slice(0, MAX_REPORTED).map(f => ({
      kind: f.kind,
      severity: f.severity,
      bytes: sum(f.bytes)
    }))
  };
}

/** The endpoint's URL for `kernelId` under `baseUrl`. */
export function findingsReportUrl(baseUrl: string, kernelId: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/gpu-hygiene/kernels/${encodeURIComponent(kernelId)}/findings`;
}

/**
 * Reports the findings of every kernel `monitor` follows (see the module's
 * documentation).
 */
export class FindingsReporter implements IDisposable {
  constructor(options: FindingsReporter.IOptions) {
    this._settings = options.serverSettings;
    this._delayMs = options.delayMs ?? 1000;
    this._monitor = options.monitor;
    this._monitor.modelAdded.connect(this._follow, this);
    this._monitor.models.forEach(model => this._follow(this._monitor, model));
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._monitor.modelAdded.disconnect(this._follow, this);
    for (const model of this._followed) {
      clearTimeout(this._timers.get(model));
      model.inventoryChanged.disconnect(this._schedule, this);
      model.disposed.disconnect(this._forget, this);
    }
    this._followed.clear();
    this._timers.clear();
  }

  private _follow(_: IGpuMonitor, model: GpuKernelModel): void {
    if (this._followed.has(model)) {
      return;
    }
    this._followed.add(model);
    model.inventoryChanged.connect(this._schedule, this);
    model.disposed.connect(this._forget, this);
    if (model.inventory) {
      this._schedule(model); // it came before this chunk loaded
    }
  }

  private _forget(model: GpuKernelModel): void {
    clearTimeout(this._timers.get(model));
    this._timers.delete(model);
    this._followed.delete(model);
    this._last.delete(model.kernelId);
  }

  private _schedule(model: GpuKernelModel): void {
    if (this._isDisposed || this._refused.has(model.kernelId)) {
      return;
    }
    clearTimeout(this._timers.get(model));
    this._timers.set(
      model,
      setTimeout(() => {
        this._timers.delete(model);
        void this._report(model);
      }, this._delayMs)
    );
  }

  private async _report(model: GpuKernelModel): Promise<void> {
    let rules: Awaited<ReturnType<typeof loadFindings>>;
    try {
      rules = await loadFindings();
    } catch {
      return; // the rules' chunk did not load: the next inventory tries again
    }
    // the inventory and the findings of one moment (read after the await)
    const inventory = model.inventory;
    if (!inventory || model.isDisposed || this._isDisposed) {
      return;
    }
    const body = JSON.stringify(
      findingsReport(inventory, rules.findings(rules.factsOf(model)))
    );
    const kernelId = model.kernelId;
    if (this._last.get(kernelId) === body) {
      return;
    }
    try {
      const response = await ServerConnection.makeRequest(
        findingsReportUrl(this._settings.baseUrl, kernelId),
        { method: 'PUT', body },
        this._settings
      );
      if (response.status === 404 || response.status === 403) {
        // no endpoint, a kernel of another server, or a user who may not write
        this._refused.add(kernelId);
      } else if (response.ok) {
        this._last.set(kernelId, body);
      }
    } catch {
      // the server is unreachable for now: the next inventory tries again
    }
  }

  private _settings: ServerConnection.ISettings;
  private _delayMs: number;
  private _monitor: IGpuMonitor;
  private _followed = new Set<GpuKernelModel>();
  private _timers = new Map<GpuKernelModel, ReturnType<typeof setTimeout>>();
  private _last = new Map<string, string>();
  private _refused = new Set<string>();
  private _isDisposed = false;
}

/** The options of {@link FindingsReporter}. */
export namespace FindingsReporter {
  export interface IOptions {
    /** The monitor whose kernels are reported. */
    monitor: IGpuMonitor;
    /** The server's settings (its base URL, token and XSRF cookie). */
    serverSettings: ServerConnection.ISettings;
    /** How long after an inventory its report is sent (ms; default 1000). */
    delayMs?: number;
  }
}
