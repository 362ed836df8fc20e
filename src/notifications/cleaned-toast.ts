/**
 * Cleaned: a toast after a clean cell (what it freed), one per kernel: a
 * second clean updates it rather than stacking. A success when the models'
 * storages freed bytes, else an info. It hides itself
 * after 8 s. Always on (no setting). When models freed nothing, it says
 * what PyTorch's cache returned and what stays fragmented or held, from the
 * clean cell's inventory (sent just before `cleaned`).
 */
import type { GpuKernelModel } from '../model';
import type { ICleaned } from '../protocol';
import type { IRuleContext, IToastRule } from './rule';
import { sumBytes } from '../analysis/format';
import { describeCleaned } from './text';

/**
 * Live models before and after a clean cell, as the user counts them (the
 * cell marks use `userModels`: the layers of a collected model waiting in a
 * cycle are not models): the mark of the clean cell's inventory (sent just
 * before `cleaned`) and the one before it. The agent's own counts when the
 * marks are not there.
 */
export function cleanedCounts(
  model: GpuKernelModel,
  cleaned: ICleaned
): { before: number; after: number } {
  const cells = model.cells;
  const last = cells.length - 1;
  if (
    cleaned.executionCount !== null &&
    last >= 1 &&
    cells[last].executionCount === cleaned.executionCount
  ) {
    return {
      before: cells[last - 1].models.length,
      after: cells[last].models.length
    };
  }
  return cleaned.models;
}

/** How long the "freed" toast stays, milliseconds. */
const CLEANED_AUTO_CLOSE = 8000;

/** The cleaned rule: no buttons. */
export function cleanedRule({ trans }: IRuleContext): IToastRule {
  return {
    id: 'cleaned',
    policy: 'update',
    describes: 'event',
    onCleaned: (model, cleaned) => [
      {
        key: '',
        // nothing freed is no success (issue 28, item 1)
        type: sumBytes(cleaned.freed) > 0 ? 'success' : 'info',
        message: describeCleaned(
          cleaned,
          trans,
          cleanedCounts(model, cleaned),
          model.inventory?.allocator ?? null
        ),
        autoClose: CLEANED_AUTO_CLOSE
      }
    ]
  };
}
