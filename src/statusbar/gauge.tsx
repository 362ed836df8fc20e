/**
 * The status bar VRAM gauge for the current notebook's kernel.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { VDomModel, VDomRenderer } from '@jupyterlab/ui-components';
import React from 'react';
import type { GpuKernelModel } from '../model';
import { gpuProcessesOf } from '../otherkernels';
import type { IGpuMonitor } from '../tokens';
import { gaugeState, IGaugeState } from './state';

/**
 * Pure view of a gauge state.
 */
export function GaugeComponent(props: {
  state: IGaugeState;
  onClick?: () => void;
}): JSX.Element {
  const { state } = props;
  const percent =
    state.fraction === null ? null : Math.round(state.fraction * 100);
  return (
    <div
      className={`jp-GpuHygiene-gauge jp-GpuHygiene-gauge-${state.kind}${
        props.onClick ? ' jp-GpuHygiene-gauge-clickable' : ''
      }`}
      data-kind={state.kind}
      data-level={state.level}
      title={state.tooltip.join('\n')}
      onClick={props.onClick}
    >
      {percent !== null && (
        <div
          className="jp-GpuHygiene-gaugeBar"
          role="meter"
          aria-valuemin={0}
          aria-valuemax={100}
          aria-valuenow={percent}
        >
          <div
            className={`jp-GpuHygiene-gaugeFill jp-GpuHygiene-level-${state.level}`}
            style={{ width: `${percent}%` }}
          />
        </div>
      )}
      <span className="jp-GpuHygiene-gaugeText">{state.text}</span>
    </div>
  );
}

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
    this.stateChanged.emit();
  }

  private _emit(): void {
    this.stateChanged.emit();
  }

  private _monitor: IGpuMonitor;
  private _model: GpuKernelModel | null = null;
}

/**
 * Status bar widget rendering {@link GaugeComponent}.
 */
export class GpuGauge extends VDomRenderer<GaugeModel> {
  /**
   * @param onClick - what a click does (the status bar plugin opens the VRAM
   *   panel); without it the gauge is not clickable.
   */
  constructor(
    model: GaugeModel,
    trans: TranslationBundle,
    onClick?: () => void
  ) {
    super(model);
    this._trans = trans;
    this._onClick = onClick;
    this.addClass('jp-GpuHygiene-statusItem');
  }

  render(): JSX.Element | null {
    const kernelModel = this.model.model;
    if (!kernelModel) {
      return null;
    }
    const monitor = this.model.monitor;
    const state = gaugeState(
      kernelModel,
      monitor.settings,
      this._trans,
      gpuProcessesOf(kernelModel, monitor)
    );
    if (this._onClick) {
      state.tooltip.push(this._trans.__('Click for the VRAM panel'));
    }
    return <GaugeComponent state={state} onClick={this._onClick} />;
  }

  private _trans: TranslationBundle;
  private _onClick?: () => void;
}
