/**
 * Leak trend: one warning per kernel while PyTorch's allocated memory climbs
 * steadily (cell after cell, or inside one long cell), updated in place as
 * the figures change. Across cells it names what the inventory already knows
 * holds the growth (`leakHolder`: the output cache, a graph holder...). Once the user closed it, it stays quiet until the
 * climb stops (the toast is then forgotten; a new climb warns again).
 * Setting: `warnOnLeak` (and `leakMinPoints`, `leakMinR2`).
 */
import { factsOf, findings } from '../analysis/findings';
import { findLeak, leakHolder } from '../analysis/leak';
import type { GpuKernelModel } from '../model';
import type { IGpuSettings } from '../tokens';
import type { IRuleContext, IToastRule, RuleResult } from './rule';
import { describeLeak } from './text';

/** The leak-trend rule: Open VRAM panel, Don't warn again. */
export function leakRule({ trans, actions }: IRuleContext): IToastRule {
  /** When each kernel's trend was last checked: cells seen, sample seq. */
  const checked = new WeakMap<GpuKernelModel, { cells: number; seq: number }>();
  const check = (model: GpuKernelModel, settings: IGpuSettings): RuleResult => {
    const trend = settings.warnOnLeak ? findLeak(model, settings) : null;
    if (!trend) {
      return [];
    }
    const devices = model.latestSample?.devices.length ?? 1;
    const holder = leakHolder(trend, findings(factsOf(model)));
    const message = describeLeak(trend, trans, devices, holder);
    return [
      {
        key: '',
        type: 'warning',
        message,
        signature: message,
        autoClose: false,
        actions: [
          actions.openPanel('accent'),
          actions.dontWarnAgain(
            'warnOnLeak',
            trans.__('Turn off leak-trend warnings in the settings')
          )
        ]
      }
    ];
  };
  return {
    id: 'leak',
    policy: 'quiet-after-close',
    describes: 'state',
    /**
     * Re-check when the trend can have changed: the first sample after a
     * new inventory (the cell's "after" value), and every few samples while
     * a cell runs (the trend inside a long cell).
     */
    onChanged: (model, settings) => {
      const sample = model.latestSample;
      if (!sample) {
        return null;
      }
      const last = checked.get(model);
      const cells = model.cells.length;
      const lastCell = model.cells[cells - 1];
      const afterNewCell =
        cells !== last?.cells && !!lastCell && sample.t >= lastCell.t;
      const inLongCell = sample.busy && sample.seq !== last?.seq;
      if (!afterNewCell && !inLongCell) {
        return null;
      }
      checked.set(model, { cells, seq: sample.seq });
      return check(model, settings);
    },
    onSettings: check
  };
}
