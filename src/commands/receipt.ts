/**
 * Every fix is a transaction with a measured receipt (issue 28, item 1): the
 * command reads what the holders keep in the inventory it acted on, inserts
 * its cell, and, when the cell runs, compares with the inventory the agent
 * sends at the end of that cell. The toast then says what went away as the
 * agent measured it, or that the target is still there and what keeps it,
 * or that nothing went, never what the finding estimated. One mechanism for
 * Fix… (detach), Delete Variable…, Move to CPU…, Drop trainer… (Delete… of a
 * model and Clean GPU have the agent's own `cleaned` receipt).
 */
import { Notification } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { IActionCell } from '../action-cells';
import { fitText, formatBytes } from '../analysis/format';
import { heldBy, measuredFreed } from '../analysis/memory/freed';
import { withNotebook } from '../notifications/text';
import type { GpuKernelModel } from '../model';
import type { IInventory } from '../protocol';
import type { ICommandContext } from './context';

/** How long a receipt waits for the inventory after the fix's cell, milliseconds. */
export const RECEIPT_TIMEOUT = 15_000;

/** How long a receipt toast stays, milliseconds. */
const RECEIPT_AUTO_CLOSE = 8000;

/**
 * The inventories `model` sends from now on, in order: `cellInventory(count)`
 * is the one of the cell that ran as `[count]` (at once if it already came)
 * and the one received just before it, or null after `timeout` ms. `stop()`
 * stops listening.
 */
export function inventoriesSince(model: GpuKernelModel): {
  cellInventory: (
    count: number,
    timeout: number
  ) => Promise<{ before: IInventory | null; after: IInventory } | null>;
  stop: () => void;
} {
  const seen: IInventory[] = [];
  let wake: (() => void) | null = null;
  const onInventory = (_: GpuKernelModel, inventory: IInventory) => {
    seen.push(inventory);
    wake?.();
  };
  model.inventoryChanged.connect(onInventory);
  const stop = () => {
    wake = null;
    model.inventoryChanged.disconnect(onInventory);
  };
  const find = (count: number) => {
    const at = seen.findIndex(i => i.executionCount === count);
    return at < 0
      ? null
      : { before: at > 0 ? seen[at - 1] : null, after: seen[at] };
  };
  return {
    stop,
    cellInventory: (count, timeout) =>
      new Promise(resolve => {
        const done = () => {
          clearTimeout(timer);
          stop();
          resolve(find(count));
        };
        const timer = setTimeout(done, timeout);
        if (find(count)) {
          done();
        } else {
          wake = () => {
            if (find(count)) {
              done();
            }
          };
        }
      })
  };
}

/** What a fix's receipt says, and how it reads the next inventory. */
export interface IReceipt {
  /** The action done, as the toast starts: "Deleted results" (translated). */
  done: string;
  /** Said when the cell was only inserted: "Run the inserted cell to delete results." */
  toRun: string;
  /**
   * Devices whose bytes count (default: all). Move to CPU counts the CUDA
   * devices only: the copies it makes in RAM are not what it frees.
   */
  devices?: (device: string) => boolean;
  /**
   * What still keeps the target in the inventory after the cell, e.g.
   * "results still holds 24.0 MiB on cuda:0", or null when it went.
   */
  stillHeld: (after: IInventory) => string | null;
}

/** The execution count of cell `index` of `panel`'s notebook, once it ran; else null. */
function executionCountOf(panel: NotebookPanel, index: number): number | null {
  const cell = panel.content.model?.sharedModel.cells[index] as
    { execution_count?: number | null } | undefined;
  const count = cell?.execution_count;
  return typeof count === 'number' ? count : null;
}

/**
 * The fix as a transaction: insert `code` (and run it when the `cleanAction`
 * setting says so), then report its measured receipt: the inventory the
 * agent sent at the end of that very cell (matched by its execution count)
 * against the one received just before it (so that cells queued ahead of the
 * fix, or a previous fix, are not counted as its effect). The command does
 * not wait for the receipt.
 *
 * @returns the index of the inserted cell.
 * @throws what inserting throws (no notebook model); nothing is reported then.
 */
export async function insertWithReceipt(
  ctx: ICommandContext,
  model: GpuKernelModel | null,
  panel: NotebookPanel,
  code: string,
  action: IActionCell,
  receipt: IReceipt
): Promise<number> {
  const { trans } = ctx;
  const ran = ctx.monitor.settings.cleanAction === 'insert-and-run';
  const start = model?.inventory ?? null;
  const inventories = model && ran ? inventoriesSince(model) : null;
  let index: number;
  try {
    index = await ctx.insert(panel, code, action);
  } catch (error) {
    inventories?.stop();
    throw error;
  }
  if (!ran) {
    Notification.info(receipt.toRun, { autoClose: 5000 });
    return index;
  }
  if (!inventories) {
    return index; // no kernel model to read the inventories of: no receipt
  }
  const count = executionCountOf(panel, index);
  if (count === null) {
    // interrupted, an earlier cell failed (the queue stopped), the kernel restarted
    inventories.stop();
    Notification.warning(
      trans.__('The inserted cell did not run. %1', receipt.toRun),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
    return index;
  }
  const notebook = panel.title?.label || null;
  void inventories.cellInventory(count, RECEIPT_TIMEOUT).then(found => {
    if (found) {
      reportReceipt(ctx, receipt, found.before ?? start, found.after, notebook);
    }
  });
  return index;
}

/**
 * The receipt of a fix's cell from the inventory before it and the one it
 * ended with: a warning when the target is still held (and what holds it), a
 * success with the bytes freed ({@link measuredFreed}) when some were, an
 * info that nothing was freed, or, where the inventories cannot tell (none
 * before the cell, a walk cut short), that the figure is not measured.
 */
export function reportReceipt(
  ctx: Pick<ICommandContext, 'trans'>,
  receipt: IReceipt,
  before: IInventory | null,
  after: IInventory,
  notebook: string | null = null
): void {
  const { trans } = ctx;
  // within a toast's 140 characters, shorter wordings first dropping the
  // explanation, the notebook named in front like every other toast
  const fit = (...candidates: string[]) =>
    withNotebook(notebook, fitText(candidates), trans);
  const still = receipt.stillHeld(after);
  if (still) {
    Notification.warning(
      fit(
        trans.__(
          '%1, but %2 (the next inventory): the VRAM panel shows what is left.',
          receipt.done,
          still
        ),
        trans.__('%1, but %2.', receipt.done, still)
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
    return;
  }
  const was = heldBy(before, receipt.devices);
  const now = heldBy(after, receipt.devices);
  const freed = measuredFreed(was, now);
  if (freed === null) {
    Notification.info(
      fit(
        trans.__(
          '%1; what it freed is not measured: the inventories before and after it are incomplete.',
          receipt.done
        ),
        trans.__('%1; what it freed is not measured.', receipt.done)
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
  } else if (freed > 0) {
    Notification.success(
      fit(
        trans.__(
          '%1: what the holders keep went from %2 to %3 (the next inventory), %4 freed.',
          receipt.done,
          formatBytes(was!.named),
          formatBytes(now!.named),
          formatBytes(freed)
        ),
        trans.__(
          '%1: %2 freed (the next inventory).',
          receipt.done,
          formatBytes(freed)
        )
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
  } else {
    Notification.info(
      fit(
        trans.__(
          '%1; the next inventory shows no memory freed by it: another holder keeps what it let go (the VRAM panel says which).',
          receipt.done
        ),
        trans.__(
          '%1; no memory freed: another holder keeps it (the VRAM panel says which).',
          receipt.done
        ),
        trans.__('%1; no memory freed.', receipt.done)
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
  }
}
