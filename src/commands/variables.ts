/**
 * The VRAM panel's variable rows: Move CUDA Tensors to CPU… (replace the
 * tensors by CPU copies; the dialog also offers to delete) and Delete
 * Variable….
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { formatBytes, sumBytes } from '../analysis/format';
import {
  generateDeleteVariableCell,
  generateMoveToCpuCell
} from '../analysis/codegen/tensor-cells';
import type { IRootBytes } from '../protocol';
import { CommandIDs } from '../tokens';
import { variableArgs } from './args';
import type { ICommandContext } from './context';

/** The kernel model's notebook and the variable root named by `args.name`. */
function variableTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; name?: unknown }
): { panel: NotebookPanel | null; root: IRootBytes | null } {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  const root =
    model?.inventory?.roots.find(
      r => r.kind === 'variable' && r.name === args.name
    ) ?? null;
  return { panel, root };
}

/** Say that the variable a row named is gone or not a plain name. */
function variableGone(ctx: ICommandContext): void {
  const { trans } = ctx;
  Notification.warning(
    trans.__(
      'That variable no longer holds tensors or is not a plain Python name; the VRAM panel shows the latest inventory.'
    ),
    { autoClose: 5000 }
  );
}

/** The VRAM only `root` holds (not shared with another holder), bytes per device. */
function aloneOf(root: IRootBytes): IRootBytes['bytes'] {
  return root.sole ?? root.bytes;
}

/** Ask (when `ask`), then insert the delete cell of `root`; resolves to whether it was inserted. */
async function deleteVariable(
  ctx: ICommandContext,
  panel: NotebookPanel,
  root: IRootBytes,
  ask: boolean
): Promise<boolean> {
  const { trans } = ctx;
  const alone = aloneOf(root);
  const code = generateDeleteVariableCell(root.name, alone, root.valueId);
  if (code === null) {
    variableGone(ctx);
    return false;
  }
  if (
    ask &&
    !(await ctx.confirm(
      trans.__('Delete the variable %1?', root.name),
      trans.__(
        'A cell running "del %1" is inserted below the active cell, then PyTorch’s cache is emptied; it frees %2 unless something else still holds it. You can no longer use %1 afterwards.',
        root.name,
        formatBytes(sumBytes(alone))
      ),
      trans.__('Delete')
    ))
  ) {
    return false;
  }
  await ctx.insert(panel, code, {
    tag: 'gpu-hygiene-delete-variable',
    key: `delete-variable:${root.name}`
  });
  return true;
}

/**
 * Ask whether to move the CUDA tensors of `root` to the CPU.
 *
 * @returns `'move'`, `'delete'` (the user chose to delete it instead) or
 *   null (cancelled).
 */
async function askMove(
  ctx: ICommandContext,
  root: IRootBytes
): Promise<'move' | 'delete' | null> {
  const { trans } = ctx;
  const shared = sumBytes(root.shared ?? {});
  const result = await showDialog({
    title: trans.__('Move the CUDA tensors of %1 to the CPU?', root.name),
    body:
      trans.__(
        'A cell is inserted below the active cell that replaces the CUDA tensors in %1 (the tensor itself, or those in its list, dict or tuple) by CPU copies (tensor.cpu()): the values stay, %2 of VRAM is freed. Or delete %1 if you no longer need it.',
        root.name,
        formatBytes(sumBytes(aloneOf(root)))
      ) +
      (shared > 0
        ? ` ${trans.__(
            '%1 more is shared with %2 and stays on the GPU while %2 holds it.',
            formatBytes(shared),
            (root.sharedWith ?? []).join(', ') || trans.__('another holder')
          )}`
        : ''),
    buttons: [
      Dialog.cancelButton({ label: trans.__('Cancel') }),
      Dialog.warnButton({
        label: trans.__('Delete %1', root.name),
        actions: ['delete']
      }),
      Dialog.okButton({ label: trans.__('Move to CPU') })
    ]
  });
  if (result.button.actions.includes('delete')) {
    return 'delete';
  }
  return result.button.accept ? 'move' : null;
}

/** Register Move CUDA Tensors to CPU…. */
function addMoveToCpu(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.moveTensorsToCpu, {
    label: trans.__('Move CUDA Tensors to CPU…'),
    caption: trans.__(
      'Ask, then insert and run a cell that replaces the CUDA tensors of this variable (or of its list, dict or tuple) by CPU copies; the dialog also offers to delete it'
    ),
    describedBy: variableArgs,
    isEnabled: args => {
      const { panel, root } = variableTarget(ctx, args);
      return !!panel && !!root && generateMoveToCpuCell(root.name) !== null;
    },
    execute: async args => {
      const { panel, root } = variableTarget(ctx, args);
      const code = root
        ? generateMoveToCpuCell(root.name, aloneOf(root), root.valueId)
        : null;
      if (!panel || !root || code === null) {
        variableGone(ctx);
        return false;
      }
      const choice = await askMove(ctx, root);
      if (choice === 'delete') {
        return deleteVariable(ctx, panel, root, false);
      }
      if (choice === null) {
        return false;
      }
      await ctx.insert(panel, code, {
        tag: 'gpu-hygiene-move-to-cpu',
        key: `move-to-cpu:${root.name}`
      });
      return true;
    }
  });
}

/** Register Delete Variable…. */
function addDeleteVariable(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.deleteVariable, {
    label: trans.__('Delete Variable…'),
    caption: trans.__(
      'Ask, then insert and run a cell that deletes this variable and empties PyTorch’s cache'
    ),
    describedBy: variableArgs,
    isEnabled: args => {
      const { panel, root } = variableTarget(ctx, args);
      return (
        !!panel && !!root && generateDeleteVariableCell(root.name) !== null
      );
    },
    execute: async args => {
      const { panel, root } = variableTarget(ctx, args);
      if (!panel || !root) {
        variableGone(ctx);
        return false;
      }
      return deleteVariable(ctx, panel, root, true);
    }
  });
}

/** Register the variable rows' Move to CPU… and Delete… commands. */
export function addVariableCommands(ctx: ICommandContext): void {
  addMoveToCpu(ctx);
  addDeleteVariable(ctx);
}
