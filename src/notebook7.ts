/**
 * The gauge in an application without a status bar: Jupyter Notebook 7
 * (the `notebook` package) runs JupyterLab's notebook, toolbar, menus and
 * notifications but has no `IStatusBar`. Its menu bar area holds its own
 * kernel status (rank 10 010) and trusted indicator (rank 11 000) right of
 * the menus; the gauge goes just before them.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { GpuGauge } from './statusbar/gauge';
import type { GaugeModel } from './statusbar/gauge-model';

/** Rank of the gauge in the menu bar area (Notebook 7's kernel status: 10 010). */
export const MENU_GAUGE_RANK = 10_005;

/** DOM id of the gauge when it sits in the menu bar area. */
export const MENU_GAUGE_ID = 'jp-GpuHygiene-menuGauge';

/**
 * Put the gauge in the shell's `menu` area, shown only while the current
 * notebook has a kernel (the gauge renders nothing otherwise, e.g. on
 * Notebook 7's file browser page).
 *
 * @param shell - the application shell; Notebook 7's `NotebookShell` and
 *   JupyterLab's `LabShell` both have a `menu` area.
 * @param gauge - the gauge widget.
 * @param model - the gauge's model.
 */
export function addGaugeToMenuArea(
  shell: JupyterFrontEnd.IShell,
  gauge: GpuGauge,
  model: GaugeModel
): void {
  gauge.id = MENU_GAUGE_ID;
  gauge.addClass('jp-GpuHygiene-menuItem');
  const update = () => gauge.setHidden(model.model === null);
  model.stateChanged.connect(update);
  gauge.disposed.connect(() => model.stateChanged.disconnect(update));
  update();
  shell.add(gauge, 'menu', { rank: MENU_GAUGE_RANK });
}
