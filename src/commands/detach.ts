/**
 * Detach Autograd Graphs…: replace the tensors with a grad_fn in a graph
 * holder (a user variable keeping autograd graphs) by `tensor.detach()`.
 */
import { Notification } from '@jupyterlab/apputils';
import { formatBytes, sumBytes } from '../analysis/format';
import {
  canFixGraph,
  generateDetachCell,
  isOutputGraph,
  removableHooks,
  sharedOutputs
} from '../analysis/memory/graph-holders';
import type { GpuKernelModel } from '../model';
import type { IGraphHolder, IInventory } from '../protocol';
import { CommandIDs } from '../tokens';
import { graphArgs } from './args';
import type { ICommandContext } from './context';
import { asCode } from './confirm';

/** The kernel model's notebook and the graph holder named by `args.name`. */
function graphTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; name?: unknown }
) {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  const graph =
    model?.inventory?.graphs.find(g => g.name === args.name) ?? null;
  return { panel, graph };
}

/**
 * What every holder of `inventory` keeps, bytes on all devices: the sum of
 * its roots' `bytes` (the agent counts each storage once, for the first root
 * that reaches it, graphs' saved storages included) but the `hidden` row
 * (models nothing reaches, which a collection during the cell may free), or
 * null without an inventory. Detaching frees memory only when no other holder keeps what
 * the graphs saved, so the receipt compares this total before and after the
 * cell, never one holder's figure (which drops when another holder takes
 * over its storages).
 */
export function heldTotal(inventory: IInventory | null): number | null {
  return inventory
    ? inventory.roots
        .filter(root => root.kind !== 'hidden')
        .reduce((sum, root) => sum + sumBytes(root.bytes), 0)
    : null;
}

/** Say why `graph` cannot be fixed: it is gone, or not a plain name holding its tensors. */
function cannotFix(ctx: ICommandContext, graph: IGraphHolder | null): void {
  const { trans } = ctx;
  Notification.warning(
    graph
      ? trans.__(
          'That variable cannot be fixed from here: it is not a plain Python name holding the tensors itself.'
        )
      : trans.__(
          'That variable no longer keeps autograd graphs; the VRAM panel shows the latest inventory.'
        ),
    { autoClose: 5000 }
  );
}

/** Ask whether to detach the tensors of `graph`. */
function confirmDetach(
  ctx: ICommandContext,
  graph: IGraphHolder,
  outputs: ReadonlyArray<IGraphHolder>,
  code: string
): Promise<boolean> {
  const { trans } = ctx;
  const hooks = removableHooks(graph);
  return ctx.confirm(
    trans.__('Detach the tensors in %1?', asCode(graph.name)),
    (isOutputGraph(graph)
      ? trans.__(
          "A cell is inserted below the active cell that gives IPython's names of the displayed output %1 (%2) the same value with its autograd graphs (%3) dropped (tensor.detach()). You can no longer call backward() through it. Next time evaluate under torch.no_grad(), or show loss.item().",
          graph.name,
          (graph.names ?? [graph.name]).join(', '),
          formatBytes(sumBytes(graph.bytes))
        )
      : trans.__(
          'A cell is inserted below the active cell that replaces each tensor with a grad_fn directly in %1 by tensor.detach(): the values stay, the autograd graphs (%2) are freed. You can no longer call backward() through them. Next time store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
          graph.name,
          formatBytes(sumBytes(graph.bytes))
        )) +
      (outputs.length
        ? ` ${trans.__(
            'The displayed output %1 keeps the same graphs: the cell detaches it too.',
            outputs.map(g => g.name).join(', ')
          )}`
        : '') +
      (hooks.length
        ? ` ${trans.__(
            'The cell also removes the forward hook on %1 that appends to %2: it would append new graphs at the next forward pass. Register it again with output.detach() if you still need it.',
            hooks.map(h => h.module).join(', '),
            graph.name
          )}`
        : ''),
    trans.__('Detach'),
    code
  );
}

/** How long the confirmation waits for the inventory after the detach cell, milliseconds. */
const DETACH_REPORT_TIMEOUT = 15_000;

/**
 * The inventories `model` sends from now on: `next()` is the first one
 * received since the call (at once if it is already there) or null after
 * `timeout` ms.
 */
function nextInventory(model: GpuKernelModel): {
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

/**
 * After the detach cell: say what it freed, measured: what every holder
 * keeps (`before`, {@link heldTotal} of the inventory the command acted
 * on) against the inventory that follows the cell (the agent sends one at
 * the end of each cell) — never the finding's estimate, which counts the
 * tensors themselves (they stay, detached). Or that the inserted cell still
 * has to be run.
 */
async function reportDetach(
  ctx: ICommandContext,
  graph: IGraphHolder,
  ran: boolean,
  inventory: Promise<IInventory | null>,
  before: number | null
): Promise<void> {
  const { trans } = ctx;
  if (!ran) {
    Notification.info(
      trans.__(
        'Run the inserted cell to detach the tensors in %1.',
        graph.name
      ),
      { autoClose: 5000 }
    );
    return;
  }
  const after = await inventory;
  if (!after) {
    return;
  }
  const left = after.graphs.find(g => g.name === graph.name);
  if (left) {
    Notification.warning(
      trans.__(
        '%1 still keeps autograd graphs (~%2): the VRAM panel shows what is left.',
        graph.name,
        formatBytes(sumBytes(left.bytes))
      ),
      { autoClose: 8000 }
    );
    return;
  }
  // measured, never the estimate: what all holders keep, before and after
  const now = heldTotal(after);
  const freed = before !== null && now !== null ? before - now : null;
  if (freed !== null && freed > 0) {
    Notification.success(
      trans.__(
        'Detached the tensors in %1: what the holders keep went from %2 to %3 (the next inventory), %4 freed.',
        graph.name,
        formatBytes(before ?? 0),
        formatBytes(now ?? 0),
        formatBytes(freed)
      ),
      { autoClose: 8000 }
    );
  } else {
    Notification.info(
      trans.__(
        'Detached the tensors in %1; the next inventory shows no memory freed by it: another holder keeps what their graphs saved (the VRAM panel says which).',
        graph.name
      ),
      { autoClose: 8000 }
    );
  }
}

/** Register Detach Autograd Graphs…. */
export function addDetachCommand(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.fixGraphHolder, {
    label: trans.__('Detach Autograd Graphs…'),
    caption: trans.__(
      'Ask, then insert and run a cell that replaces the tensors with a grad_fn in this variable by tensor.detach(): same values, no graph'
    ),
    describedBy: graphArgs,
    isEnabled: args => {
      const { panel, graph } = graphTarget(ctx, args);
      return !!panel && !!graph && canFixGraph(graph);
    },
    execute: async args => {
      const { panel, graph } = graphTarget(ctx, args);
      const model = ctx.modelFor(args);
      const outputs = graph
        ? sharedOutputs(graph, model?.inventory ?? null)
        : [];
      const code = graph ? generateDetachCell(graph, outputs) : null;
      if (!panel || !graph || code === null) {
        cannotFix(ctx, graph);
        return false;
      }
      if (!(await confirmDetach(ctx, graph, outputs, code))) {
        return false;
      }
      const ran = ctx.monitor.settings.cleanAction === 'insert-and-run';
      const before = heldTotal(model?.inventory ?? null);
      const inventories = model && ran ? nextInventory(model) : null;
      await ctx.insert(panel, code, {
        tag: 'gpu-hygiene-detach-graphs',
        key: `detach-graphs:${graph.name}`
      });
      // The confirmation comes with the cell's inventory; the command does not wait for it.
      void reportDetach(
        ctx,
        graph,
        ran,
        inventories?.next(DETACH_REPORT_TIMEOUT) ?? Promise.resolve(null),
        before
      );
      return true;
    }
  });
}
