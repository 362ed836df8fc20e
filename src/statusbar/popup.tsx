/**
 * The gauge's popup (JupyterLab's status bar `Popup`, as core's line/column
 * and cell counter items use it): the breakdown the gauge's state gives
 * (`IGaugeDetails`) as headed lists, and buttons for the VRAM panel and
 * Clean GPU. It is a labelled dialog for screen readers; Escape closes it
 * (the `Popup` handles the key) and focus returns to the gauge.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { VDomRenderer } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import React from 'react';
import { gpuProcessesOf } from '../other-kernels';
import { CommandIDs } from '../tokens';
import type { GaugeModel } from './gauge-model';
import { gaugeState, IGaugeState } from './state';

/** DOM id of the popup's title (the dialog's accessible name refers to it). */
export const POPUP_TITLE_ID = 'jp-GpuHygiene-popupTitle';

/** What the popup's buttons do. */
export interface IGaugeDetailsActions {
  /** Open the VRAM panel; absent: no button. */
  openPanel?: () => void;
  /** Run Clean GPU on this kernel; absent: no button. */
  clean?: () => void;
  /** Whether Clean GPU can run now (a notebook with a Python kernel). */
  canClean: boolean;
}

/** A headed list of lines, or nothing when there are none. */
function Section(props: {
  heading: string;
  lines: string[];
  kind: string;
}): JSX.Element | null {
  if (props.lines.length === 0) {
    return null;
  }
  return (
    <section
      className="jp-GpuHygiene-popupSection"
      data-section={props.kind}
      aria-label={props.heading}
    >
      <h3 className="jp-GpuHygiene-popupHeading">{props.heading}</h3>
      <ul className="jp-GpuHygiene-popupList">
        {props.lines.map((line, i) => (
          <li key={i}>{line}</li>
        ))}
      </ul>
    </section>
  );
}

/**
 * Pure view of the gauge's breakdown: the title (the gauge's own text), a
 * lead sentence and its smaller notes (e.g. NVML's raw error), one section
 * per device, the summary (findings, live models), agent errors, what the
 * kernel's environment lacks that the agent degrades from (limits), and the
 * buttons.
 */
export function GaugeDetails(props: {
  state: IGaugeState;
  trans: TranslationBundle;
  actions: IGaugeDetailsActions;
}): JSX.Element {
  const { state, trans, actions } = props;
  const { details } = state;
  return (
    <div className="jp-GpuHygiene-popupContent" data-kind={state.kind}>
      <h2 className="jp-GpuHygiene-popupTitle" id={POPUP_TITLE_ID}>
        {trans.__('GPU memory of this kernel')}
      </h2>
      <p className="jp-GpuHygiene-popupFigure">{state.text}</p>
      {details.lead !== null && (
        <p className="jp-GpuHygiene-popupLead">{details.lead}</p>
      )}
      {details.notes.map((note, i) => (
        <p key={i} className="jp-GpuHygiene-popupNote">
          {note}
        </p>
      ))}
      {details.devices.map((device, i) => (
        <Section
          key={i}
          kind="device"
          heading={device.heading}
          lines={device.lines}
        />
      ))}
      <Section
        kind="summary"
        heading={trans.__('Models and findings')}
        lines={details.summary}
      />
      <Section
        kind="errors"
        heading={trans.__('Agent errors')}
        lines={details.errors}
      />
      <Section
        kind="limits"
        heading={trans.__('Limits of this environment')}
        lines={details.limits}
      />
      {(actions.openPanel || actions.clean) && (
        <div className="jp-GpuHygiene-popupActions">
          {actions.openPanel && (
            <button
              type="button"
              className="jp-Button jp-mod-styled jp-mod-reject"
              data-action="open-panel"
              onClick={actions.openPanel}
            >
              {trans.__('Open VRAM panel')}
            </button>
          )}
          {actions.clean && (
            // the popup's action: primary (issue 29: grey, it read as disabled)
            <button
              type="button"
              className="jp-Button jp-mod-styled jp-mod-accept"
              data-action="clean"
              disabled={!actions.canClean}
              onClick={actions.clean}
            >
              {trans.__('Clean GPU')}
            </button>
          )}
        </div>
      )}
    </div>
  );
}

/**
 * The popup's body: {@link GaugeDetails} of the gauge model's current
 * kernel, re-rendered as its figures change; a labelled dialog.
 */
export class GaugeDetailsBody extends VDomRenderer<GaugeModel> {
  /**
   * @param done - called after a button ran its command (the gauge closes
   *   the popup first).
   */
  constructor(
    model: GaugeModel,
    trans: TranslationBundle,
    commands: CommandRegistry,
    done: () => void
  ) {
    super(model);
    this._trans = trans;
    this._commands = commands;
    this._done = done;
    this.addClass('jp-GpuHygiene-popup');
    this.node.setAttribute('role', 'dialog');
    this.node.setAttribute('aria-labelledby', POPUP_TITLE_ID);
    this.node.tabIndex = -1;
  }

  render(): JSX.Element | null {
    const kernelModel = this.model.model;
    if (!kernelModel) {
      return (
        <div className="jp-GpuHygiene-popupContent">
          <h2 className="jp-GpuHygiene-popupTitle" id={POPUP_TITLE_ID}>
            {this._trans.__('GPU memory of this kernel')}
          </h2>
          <p className="jp-GpuHygiene-popupLead">
            {this._trans.__('Open a notebook with a Python kernel.')}
          </p>
        </div>
      );
    }
    const monitor = this.model.monitor;
    const state = gaugeState(
      kernelModel,
      monitor.settings,
      this._trans,
      gpuProcessesOf(kernelModel, monitor)
    );
    const args = { kernelId: kernelModel.kernelId };
    const run =
      (id: string, commandArgs = {}) =>
      () => {
        this._done();
        if (this._commands.hasCommand(id)) {
          void this._commands.execute(id, commandArgs);
        }
      };
    return (
      <GaugeDetails
        state={state}
        trans={this._trans}
        actions={{
          openPanel: run(CommandIDs.openPanel),
          clean: run(CommandIDs.clean, args),
          canClean:
            this._commands.hasCommand(CommandIDs.clean) &&
            this._commands.isEnabled(CommandIDs.clean, args)
        }}
      />
    );
  }

  private _trans: TranslationBundle;
  private _commands: CommandRegistry;
  private _done: () => void;
}
