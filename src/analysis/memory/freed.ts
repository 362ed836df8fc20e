/**
 * The figures of a fix's receipt (issue 28, item 1), apart from the toast
 * that says them (`commands/receipt.ts`): what the holders of an inventory
 * keep, and what went away between the inventory a fix acted on and the one
 * its own cell ended with. Pure functions of two inventories, so the GPU check
 * runs this very code against `torch.cuda.memory_allocated()`
 * (`test/agent/test_llm_holders.py`).
 */
import { sumBytes } from '../format';
import type { IInventory } from '../../protocol';

/** What the holders of an inventory keep, bytes on the devices a receipt counts. */
export interface IHeld {
  /**
   * The roots' bytes but the `hidden` row (models nothing reaches, which a
   * collection during the cell may free): what the receipt's figures say.
   */
  named: number;
  /**
   * Everything the inventory accounts for: the roots, `hidden` and the
   * allocator's bytes no root reaches (`unattributed`). A target that
   * survives outside the roots moves its bytes from `named` to here.
   */
  all: number;
  /** The walk hit a bound: the figures may miss holders. */
  truncated: boolean;
}

/**
 * What the holders of `inventory` keep ({@link IHeld}) on the devices
 * `devices` accepts (all by default), or null without an inventory. The agent
 * counts each storage once, for the first root that reaches it, graphs' saved
 * storages included.
 */
export function heldBy(
  inventory: IInventory | null,
  devices: (device: string) => boolean = () => true
): IHeld | null {
  if (!inventory) {
    return null;
  }
  const named = inventory.roots
    .filter(root => root.kind !== 'hidden')
    .reduce((sum, root) => sum + sumBytes(root.bytes, devices), 0);
  const hidden = inventory.roots
    .filter(root => root.kind === 'hidden')
    .reduce((sum, root) => sum + sumBytes(root.bytes, devices), 0);
  return {
    named,
    all: named + hidden + sumBytes(inventory.unattributed ?? {}, devices),
    truncated: inventory.truncated
  };
}

/**
 * What a fix freed, measured: the drop of what the named holders keep, but
 * never more than the drop of everything the inventories account for (bytes
 * that moved to a holder the walk does not name, or to no root, were not
 * freed); null when the figures cannot tell (no inventory, or a truncated one).
 */
export function measuredFreed(
  before: IHeld | null,
  after: IHeld | null
): number | null {
  if (!before || !after || before.truncated || after.truncated) {
    return null;
  }
  return Math.min(before.named - after.named, before.all - after.all);
}
