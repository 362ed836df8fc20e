/**
 * The gauge's model: the monitor's current kernel model, followed as the
 * current notebook changes, for the gauge (`gauge.tsx`) and its popup
 * (`popup.tsx`), which both render it.
 */
import { VDomModel } from '@jupyterlab/ui-components';
import {
  loadedFindings,
  loadFindings
} from '../analysis/findings/rules-loader';
import type { GpuKernelModel } from '../model';
import type { IGpuMonitor } from '../tokens';

/**
 * Follows the monitor's current model and its changes.
 */
export class GaugeModel extends VDomModel {
  constructor(monitor: IGpuMonitor) {
    super();
    this._monitor = monitor;
    monitor.currentChanged.connect(this._onCurrent, this);
    monitor.settingsChanged.connect(this._emit, this);
    monitor.serverKernels.changed.connect(this._emit, this);
    this._onCurrent();
  }

  /** Model shown, or null when no notebook kernel is current. */
  get model(): GpuKernelModel | null {
    return this._model;
  }

  /** The monitor. */
  get monitor(): IGpuMonitor {
    return this._monitor;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._model?.changed.disconnect(this._emit, this);
    this._monitor.currentChanged.disconnect(this._onCurrent, this);
    this._monitor.settingsChanged.disconnect(this._emit, this);
    this._monitor.serverKernels.changed.disconnect(this._emit, this);
    super.dispose();
  }

  private _onCurrent(): void {
    const next = this._monitor.currentModel;
    if (next === this._model) {
      return;
    }
    this._model?.changed.disconnect(this._emit, this);
    this._model = next;
    next?.changed.connect(this._emit, this);
    if (next && !loadedFindings()) {
      // the tooltip's findings line needs the rules: render again with them
      loadFindings().then(
        () => {
          if (!this.isDisposed) {
            this.stateChanged.emit();
          }
        },
        () => undefined // no findings line; the next kernel asks again
      );
    }
    this.stateChanged.emit();
  }

  private _emit(): void {
    this.stateChanged.emit();
  }

  private _monitor: IGpuMonitor;
  private _model: GpuKernelModel | null = null;
}
