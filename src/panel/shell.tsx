/**
 * The VRAM panel's shell: a small ReactWidget that sits in the right sidebar
 * from the start and loads the panel itself (its views and recharts) in a
 * separate chunk the first time it is shown. Opening JupyterLab does not pay
 * for the chart.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import type { Message } from '@lumino/messaging';
import React from 'react';
import { gpuPanelIcon } from '../icons';
import type { IGpuMonitor } from '../tokens';

/** The lazily loaded panel view (src/panel/view.tsx, with recharts). */
const PanelView = React.lazy(() => import('./view'));

/** Shows what went wrong if the panel's chunk cannot be loaded. */
class LoadBoundary extends React.Component<
  { message: string; children?: React.ReactNode },
  { error: string | null }
> {
  state = { error: null as string | null };

  static getDerivedStateFromError(error: unknown): { error: string } {
    return { error: error instanceof Error ? error.message : String(error) };
  }

  render(): React.ReactNode {
    if (this.state.error !== null) {
      return (
        <div className="jp-GpuHygiene-empty jp-GpuHygiene-error">
          {this.props.message} {this.state.error}
        </div>
      );
    }
    return this.props.children;
  }
}

/**
 * The VRAM panel widget for the current notebook's kernel.
 */
export class GpuPanel extends ReactWidget {
  constructor(options: GpuPanel.IOptions) {
    super();
    this._options = options;
    const { trans } = options;
    this.id = GpuPanel.ID;
    this.title.icon = gpuPanelIcon;
    this.title.caption = trans.__(
      'VRAM: time series, per-cell deltas, who holds VRAM, what else is on the GPU'
    );
    this.addClass('jp-GpuHygiene-panel');
    this.addClass('jp-GpuHygiene-sidebar');
  }

  /** Whether the panel has been shown (and its chunk requested). */
  get loaded(): boolean {
    return this._shown;
  }

  protected onAfterAttach(msg: Message): void {
    if (this.isVisible) {
      this._shown = true;
      void this._options.monitor.serverKernels.refresh(0);
    }
    super.onAfterAttach(msg);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    // Who the other processes on the GPU are: asked of the server on every
    // opening; and a user looks: fresh figures (from the kernel only where
    // the server cannot read its GPU).
    const { monitor } = this._options;
    if (monitor.currentModel) {
      monitor.askForFigures(monitor.currentModel);
    } else {
      void monitor.serverKernels.refresh(0);
    }
    if (!this._shown) {
      this._shown = true;
      this.update();
    }
  }

  render(): JSX.Element | null {
    if (!this._shown) {
      // Hidden in its sidebar: nothing is loaded yet.
      return null;
    }
    const { monitor, commands, trans } = this._options;
    return (
      <LoadBoundary message={trans.__('The VRAM panel could not be loaded:')}>
        <React.Suspense
          fallback={
            <div className="jp-GpuHygiene-empty">
              {trans.__('Loading the VRAM panel…')}
            </div>
          }
        >
          <PanelView monitor={monitor} commands={commands} trans={trans} />
        </React.Suspense>
      </LoadBoundary>
    );
  }

  private _options: GpuPanel.IOptions;
  private _shown = false;
}

/** GpuPanel statics. */
export namespace GpuPanel {
  /** DOM id of the panel (also its layout-restorer name). */
  export const ID = 'jp-GpuHygiene-panel';

  /** Constructor options. */
  export interface IOptions {
    /** The monitor whose current model the panel shows. */
    monitor: IGpuMonitor;
    /** Commands run by the row actions (free, delete…). */
    commands: CommandRegistry;
    /** Translations. */
    trans: TranslationBundle;
  }
}
