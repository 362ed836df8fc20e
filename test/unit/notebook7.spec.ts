/**
 * The gauge where there is no status bar (Notebook 7): in the shell's menu
 * area, hidden while no notebook kernel is current.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { nullTranslator } from '@jupyterlab/translation';
import type { Widget } from '@lumino/widgets';
import { GpuKernelModel } from '../../src/model';
import {
  addGaugeToMenuArea,
  MENU_GAUGE_ID,
  MENU_GAUGE_RANK
} from '../../src/notebook7';
import { GpuGauge } from '../../src/statusbar/gauge';
import { GaugeModel } from '../../src/statusbar/gauge-model';
import { OneModelMonitor } from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

/** A monitor whose current model a test switches (null: no notebook). */
class SwitchingMonitor extends OneModelMonitor {
  current: GpuKernelModel | null = null;
  get currentModel(): GpuKernelModel {
    return this.current as GpuKernelModel;
  }
  switchTo(model: GpuKernelModel | null): void {
    this.current = model;
    this.currentChanged.emit(model);
  }
}

describe('addGaugeToMenuArea', () => {
  it('adds the gauge to the menu area, shown only while a notebook kernel is current', () => {
    const added: Array<{
      widget: Widget;
      area?: string;
      options?: unknown;
    }> = [];
    const shell = {
      add: (widget: Widget, area?: string, options?: unknown) =>
        added.push({ widget, area, options })
    } as unknown as JupyterFrontEnd.IShell;
    const kernelModel = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new SwitchingMonitor(kernelModel);
    const model = new GaugeModel(monitor);
    const gauge = new GpuGauge(model, trans);

    addGaugeToMenuArea(shell, gauge, model);

    expect(added).toEqual([
      { widget: gauge, area: 'menu', options: { rank: MENU_GAUGE_RANK } }
    ]);
    expect(gauge.id).toBe(MENU_GAUGE_ID);
    expect(gauge.hasClass('jp-GpuHygiene-menuItem')).toBe(true);
    // Notebook 7's file browser page: no notebook, nothing to show.
    expect(gauge.isHidden).toBe(true);
    monitor.switchTo(kernelModel);
    expect(gauge.isHidden).toBe(false);
    monitor.switchTo(null);
    expect(gauge.isHidden).toBe(true);
    gauge.dispose();
    model.dispose();
  });
});
