/**
 * The status bar VRAM gauge for the current notebook's kernel. In the
 * status bar, a click (or Enter/Space: the gauge is a focusable button)
 * opens its popup (`popup.tsx`) with the breakdown; where the status bar's
 * popup cannot open (Notebook 7's menu bar, at the top of the page) a click
 * opens the VRAM panel and the breakdown is the native tooltip.
 */
import { Popup, showPopup } from '@jupyterlab/statusbar';
import type { TranslationBundle } from '@jupyterlab/translation';
import { VDomRenderer } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import type { Widget } from '@lumino/widgets';
import React from 'react';
import { gpuProcessesOf } from '../other-kernels';
import { CommandIDs } from '../tokens';
import type { GaugeModel } from './gauge-model';
import { gaugeState, IGaugeState } from './state';

/**
 * Pure view of a gauge state.
 *
 * @param title - the native tooltip; by default the breakdown's lines.
 * @param expanded - with `onClick`, whether the gauge's popup is open: the
 *   gauge is then a button that opens a dialog (`aria-haspopup`,
 *   `aria-expanded`); without it, a click target only.
 */
export function GaugeComponent(props: {
  state: IGaugeState;
  onClick?: () => void;
  title?: string;
  expanded?: boolean;
}): JSX.Element {
  const { state, onClick, expanded } = props;
  const percent =
    state.fraction === null ? null : Math.round(state.fraction * 100);
  const button = onClick !== undefined && expanded !== undefined;
  const onKeyDown = (event: React.KeyboardEvent) => {
    if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      event.stopPropagation();
      onClick?.();
    }
  };
  return (
    <div
      className={`jp-GpuHygiene-gauge jp-GpuHygiene-gauge-${state.kind}${
        onClick ? ' jp-GpuHygiene-gauge-clickable' : ''
      }`}
      data-kind={state.kind}
      data-level={state.level}
      title={props.title ?? state.tooltip.join('\n')}
      onClick={onClick}
      {...(button
        ? {
            role: 'button',
            tabIndex: 0,
            'aria-haspopup': 'dialog' as const,
            'aria-expanded': expanded,
            onKeyDown
          }
        : {})}
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
 * Status bar widget rendering {@link GaugeComponent}.
 */
export class GpuGauge extends VDomRenderer<GaugeModel> {
  /**
   * @param options.commands - the app's commands: the popup's buttons (and,
   *   without a popup, a click) run the VRAM panel and Clean GPU commands;
   *   without them the gauge is not clickable.
   * @param options.popup - whether a click opens the popup (in the status
   *   bar) or the VRAM panel (elsewhere).
   */
  constructor(
    model: GaugeModel,
    trans: TranslationBundle,
    options: { commands?: CommandRegistry; popup?: boolean } = {}
  ) {
    super(model);
    this._trans = trans;
    this._commands = options.commands ?? null;
    this._withPopup = !!options.popup;
    this.addClass('jp-GpuHygiene-statusItem');
    this.addClass('jp-mod-highlighted');
  }

  /** The open popup, or null. */
  get popup(): Popup | null {
    return this._popup;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._popup?.dispose();
    super.dispose();
  }

  /**
   * Open the popup, or close it when it is open. The popup's view comes in
   * a chunk of its own (off JupyterLab's start path), loaded at the first
   * opening.
   */
  togglePopup(): void {
    if (this._popup) {
      this._closePopup();
      return;
    }
    if (!this._commands || this._opening) {
      return;
    }
    // A user looks: fresh figures (from the kernel only where the server
    // cannot read its GPU).
    const shown = this.model.model;
    if (shown) {
      this.model.monitor.askForFigures(shown);
    }
    this._opening = true;
    import('./popup').then(
      ({ GaugeDetailsBody }) => {
        this._opening = false;
        if (!this._popup && !this.isDisposed && this._commands) {
          this._showPopup(
            new GaugeDetailsBody(this.model, this._trans, this._commands, () =>
              this._closePopup()
            )
          );
        }
      },
      () => {
        this._opening = false; // not loaded: the next click tries again
      }
    );
  }

  private _showPopup(body: Widget): void {
    const popup = showPopup({
      body,
      anchor: this,
      align: 'left',
      hasDynamicSize: true
    });
    this._popup = popup;
    popup.disposed.connect(() => {
      if (this._popup !== popup) {
        return;
      }
      this._popup = null;
      // Escape (or a button) closed it while focus was inside (`disposed`
      // comes before the popup leaves the page): back to the gauge, not to
      // the page's body. A click elsewhere keeps its focus.
      const active = document.activeElement;
      if (!active || active === document.body || popup.node.contains(active)) {
        this._focusGauge();
      }
      this.update();
    });
    this.update();
    body.node.focus();
  }

  private _closePopup(): void {
    this._popup?.dispose();
  }

  private _focusGauge(): void {
    this.node.querySelector<HTMLElement>('.jp-GpuHygiene-gauge')?.focus();
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
    const commands = this._commands;
    if (!commands) {
      return <GaugeComponent state={state} />;
    }
    if (this._withPopup) {
      return (
        <GaugeComponent
          state={state}
          title={this._trans.__('GPU memory — click for details')}
          expanded={this._popup !== null}
          onClick={() => this.togglePopup()}
        />
      );
    }
    state.tooltip.push(this._trans.__('Click for the VRAM panel'));
    return (
      <GaugeComponent
        state={state}
        onClick={() => {
          if (commands.hasCommand(CommandIDs.openPanel)) {
            void commands.execute(CommandIDs.openPanel);
          }
        }}
      />
    );
  }

  private _trans: TranslationBundle;
  private _commands: CommandRegistry | null;
  private _withPopup: boolean;
  private _popup: Popup | null = null;
  private _opening = false;
}
