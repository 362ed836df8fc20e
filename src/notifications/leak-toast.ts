/**
 * Leak trend: one warning per kernel while PyTorch's allocated memory climbs
 * steadily (cell after cell, or inside one long cell), updated in place as
 * the figures change. Inside a running cell it says when the GPU is full at
 * that rate (`projectFull`) and offers Interrupt kernel; across cells, and
 * once the climbing cell ended and its inventory came, it names what holds
 * the growth (`leakHolder`: the output cache, a graph holder...) with its
 * fix. Once the user closed it, it stays quiet until the climb stops (the
 * toast is then forgotten; a new climb warns again).
 * Setting: `warnOnLeak` (and `leakMinPoints`, `leakMinR2`).
 */
import { factsOf, findings } from '../analysis/findings';
import { nextExecutionCount } from '../analysis/cells/cell-history';
import { findLeak, leakHolder } from '../analysis/memory/leak';
import { projectFull } from '../analysis/memory/projection';
import type { GpuKernelModel } from '../model';
import type { IGpuSettings } from '../tokens';
import type { IRuleContext, IToastRule, RuleResult } from './rule';
import { describeLeak } from './text';

/**
 * The leak-trend rule. While a cell climbs: Interrupt kernel, Open VRAM
 * panel, Don't warn again, and the time until the GPU is full; once the
 * cell's inventory names what held the growth: its fix (e.g. Fix… for a
 * graph holder), Open VRAM panel, Don't warn again.
 */
export function leakRule({ trans, actions }: IRuleContext): IToastRule {
  /** When each kernel's trend was last checked: cells seen, sample seq. */
  const checked = new WeakMap<GpuKernelModel, { cells: number; seq: number }>();
  const check = (model: GpuKernelModel, settings: IGpuSettings): RuleResult => {
    const trend = settings.warnOnLeak ? findLeak(model, settings) : null;
    if (!trend) {
      return [];
    }
    const devices = model.latestSample?.devices.length ?? 1;
    const running = trend.basis === 'samples' && trend.executionCount === null;
    const holder = running
      ? null
      : leakHolder(
          trend,
          findings(factsOf(model)),
          model.inventory?.executionCount ?? null
        );
    const message = describeLeak(trend, trans, devices, holder, {
      cell: running ? nextExecutionCount(model.cells) : null,
      projection: running ? projectFull(trend, model.samples) : null
    });
    const fix = holder ? actions.fix(model.kernelId, holder) : null;
    const dontWarn = actions.dontWarnAgain(
      'warnOnLeak',
      trans.__('Turn off leak-trend warnings in the settings')
    );
    return [
      {
        key: '',
        type: 'warning',
        message,
        signature: message,
        autoClose: false,
        actions: running
          ? [
              actions.interruptKernel(model.kernelId, 'accent'),
              actions.openPanel(),
              dontWarn
            ]
          : fix
            ? [fix, actions.openPanel(), dontWarn]
            : [actions.openPanel('accent'), dontWarn]
      }
    ];
  };
  return {
    id: 'leak',
    policy: 'quiet-after-close',
    describes: 'state',
    /**
     * Re-check when the trend can have changed: the first sample after a
     * new inventory (the cell's "after" value), and every sample while a
     * cell runs (the trend inside a long cell: its floor windows are a
     * second long).
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
