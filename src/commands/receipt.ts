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
import { formatBytes, sumBytes } from '../analysis/format';
import type { GpuKernelModel } from '../model';
import type { IInventory } from '../protocol';
import type { ICommandContext } from './context';

/** How long a receipt waits for the inventory after the fix's cell, milliseconds. */
export const RECEIPT_TIMEOUT = 15_000;

/** How long a receipt toast stays, milliseconds. */
const RECEIPT_AUTO_CLOSE = 8000;

/**
 * What every holder of `inventory` keeps, bytes on the devices `devices`
 * accepts (all by default): the sum of its roots' `bytes` (the agent counts
 * each storage once, for the first root that reaches it, graphs' saved
 * storages included) but the `hidden` row (models nothing reaches, which a
 * collection during the cell may free), or null without an inventory. A fix
 * frees memory only when no other holder keeps what it let go, so a receipt
 * compares this total before and after the cell, never one holder's figure
 * (which drops when another holder takes over its storages).
 */
export function heldTotal(
  inventory: IInventory | null,
  devices: (device: string) => boolean = () => true
): number | null {
  return inventory
    ? inventory.roots
        .filter(root => root.kind !== 'hidden')
        .reduce((sum, root) => sum + sumBytes(root.bytes, devices), 0)
    : null;
}

/**
 * The inventories `model` sends from now on: `next()` is the first one
 * received since the call (at once if it is already there) or null after
 * `timeout` ms.
 */
export function nextInventory(model: GpuKernelModel): {
  next: (timeout: number) => Promise<IInventory | null>;
} {
  let received: IInventory | null = null;
  let wake: (() => void) | null = null;
  const onInventory = (_: GpuKernelModel, inventory: IInventory) => {
    received = inventory;
    wake?.();
  };
  model.inventoryChanged.connect(onInventory);
  return {
    next: timeout =>
      new Promise(resolve => {
        const done = () => {
          clearTimeout(timer);
          model.inventoryChanged.disconnect(onInventory);
          resolve(received);
        };
        const timer = setTimeout(done, timeout);
        if (received) {
          done();
        } else {
          wake = done;
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

/**
 * The fix as a transaction: insert `code` (and run it when the `cleanAction`
 * setting says so), then report its measured receipt (see
 * {@link reportReceipt}); the command does not wait for the receipt.
 *
 * @returns the index of the inserted cell.
 */
export async function insertWithReceipt(
  ctx: ICommandContext,
  model: GpuKernelModel | null,
  panel: NotebookPanel,
  code: string,
  action: IActionCell,
  receipt: IReceipt
): Promise<number> {
  const ran = ctx.monitor.settings.cleanAction === 'insert-and-run';
  const before = heldTotal(model?.inventory ?? null, receipt.devices);
  const inventories = model && ran ? nextInventory(model) : null;
  const index = await ctx.insert(panel, code, action);
  void reportReceipt(
    ctx,
    receipt,
    ran,
    inventories?.next(RECEIPT_TIMEOUT) ?? Promise.resolve(null),
    before
  );
  return index;
}

/**
 * After a fix's cell: a warning when the target is still held (and what
 * holds it), a success with the bytes the holders' total dropped by when it
 * dropped, else an info that nothing was freed; an info that the cell still
 * has to be run when it was only inserted. Nothing when no inventory came.
 */
export async function reportReceipt(
  ctx: Pick<ICommandContext, 'trans'>,
  receipt: IReceipt,
  ran: boolean,
  inventory: Promise<IInventory | null>,
  before: number | null
): Promise<void> {
  const { trans } = ctx;
  if (!ran) {
    Notification.info(receipt.toRun, { autoClose: 5000 });
    return;
  }
  const after = await inventory;
  if (!after) {
    return;
  }
  const still = receipt.stillHeld(after);
  if (still) {
    Notification.warning(
      trans.__(
        '%1, but %2 (the next inventory): the VRAM panel shows what is left.',
        receipt.done,
        still
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
    return;
  }
  // measured, never the estimate: what all holders keep, before and after
  const now = heldTotal(after, receipt.devices);
  const freed = before !== null && now !== null ? before - now : null;
  if (freed !== null && freed > 0) {
    Notification.success(
      trans.__(
        '%1: what the holders keep went from %2 to %3 (the next inventory), %4 freed.',
        receipt.done,
        formatBytes(before ?? 0),
        formatBytes(now ?? 0),
        formatBytes(freed)
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
  } else {
    Notification.info(
      trans.__(
        '%1; the next inventory shows no memory freed by it: another holder keeps what it let go (the VRAM panel says which).',
        receipt.done
      ),
      { autoClose: RECEIPT_AUTO_CLOSE }
    );
  }
}
