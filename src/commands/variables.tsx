/**
 * The VRAM panel's variable rows: Move CUDA Tensors to CPU… (replace the
 * tensors by CPU copies; the dialog also offers to delete) and Delete
 * Variable….
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { TranslationBundle } from '@jupyterlab/translation';
import {
  formatBytes,
  formatPlacement,
  isCudaDevice,
  sumBytes
} from '../analysis/format';
import {
  generateDeleteVariableCell,
  generateMoveToCpuCell
} from '../analysis/codegen/tensor-cells';
import type { PerDevice } from '../analysis/findings/types';
import type { GpuKernelModel } from '../model';
import type { IInventory, IRootBytes } from '../protocol';
import { CommandIDs } from '../tokens';
import { variableArgs } from './args';
import type { ICommandContext } from './context';
import * as React from 'react';
import { asCode, confirmBody, withCode } from './confirm';

/** The receipt's module (with the toasts' texts it uses): loaded when a fix runs, off JupyterLab's start path. */
const receiptModule = () => import('./receipt');

/**
 * The kernel model's notebook, the variable root named by `args.name`, the
 * roots of `args.with` (Delete only: variables deleted with it; null when
 * one is not a variable root any more) and what deleting them all returns:
 * the optimizer's bytes as the agent measured them when the first is one
 * (its state, and the parameters and gradients no live model keeps), else
 * its root's `sole` bytes.
 */
function variableTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; name?: unknown; with?: unknown }
): {
  model: GpuKernelModel | null;
  panel: NotebookPanel | null;
  root: IRootBytes | null;
  also: IRootBytes[] | null;
  bytes: PerDevice;
} {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  const roots = model?.inventory?.roots ?? [];
  const find = (name: unknown) =>
    roots.find(r => r.kind === 'variable' && r.name === name) ?? null;
  const root = find(args.name);
  const wanted = Array.isArray(args.with) ? args.with : [];
  const found = wanted.map(find);
  const also = found.every(r => r !== null) ? (found as IRootBytes[]) : null;
  const optimizer = model?.inventory?.optimizers?.find(
    o => o.name === args.name
  );
  const bytes: PerDevice = optimizer
    ? optimizer.bytes
    : root
      ? aloneOf(root)
      : {};
  return { model, panel, root, also, bytes };
}

/**
 * What the first of `names` still a variable root of `after` holds ("results
 * still holds 24.0 MiB on cuda:0"), or null when none is: a name the delete
 * cell kept because it changed since the finding.
 */
function stillNamed(
  after: IInventory,
  names: ReadonlyArray<string>,
  trans: TranslationBundle
): string | null {
  const left = after.roots.find(
    r => r.kind === 'variable' && names.includes(r.name)
  );
  return left
    ? trans.__(
        '%1 still holds %2',
        left.name,
        formatPlacement(left.bytes, trans)
      )
    : null;
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

/**
 * Ask (when `ask`), then insert the delete cell of `root` (and of `also`,
 * deleted in the same cell); resolves to whether it was inserted. `bytes`:
 * what deleting them returns, for the dialog and the cell's comment.
 */
async function deleteVariable(
  ctx: ICommandContext,
  model: GpuKernelModel | null,
  panel: NotebookPanel,
  root: IRootBytes,
  ask: boolean,
  also: ReadonlyArray<IRootBytes> = [],
  bytes: PerDevice = aloneOf(root)
): Promise<boolean> {
  const { trans } = ctx;
  const code = generateDeleteVariableCell(root.name, bytes, root.valueId, also);
  if (code === null) {
    variableGone(ctx);
    return false;
  }
  const names = [root.name, ...also.map(r => r.name)].map(asCode).join(', ');
  const body = also.length
    ? trans.__(
        'A cell running "del %1" is inserted below the active cell, then PyTorch’s cache is emptied; it frees %2 unless something else still holds it. %3 keeps %4: deleting %4 alone would free nothing. You can no longer use %1 afterwards.',
        names,
        formatBytes(sumBytes(bytes)),
        also.map(r => asCode(r.name)).join(', '),
        asCode(root.name)
      )
    : trans.__(
        'A cell running "del %1" is inserted below the active cell, then PyTorch’s cache is emptied; it frees %2 unless something else still holds it. You can no longer use %1 afterwards.',
        asCode(root.name),
        formatBytes(sumBytes(bytes))
      );
  if (
    ask &&
    !(await ctx.confirm(
      also.length
        ? trans.__('Delete the variables %1?', names)
        : trans.__('Delete the variable %1?', asCode(root.name)),
      body,
      trans.__('Delete'),
      code
    ))
  ) {
    return false;
  }
  const plain = [root.name, ...also.map(r => r.name)];
  await (
    await receiptModule()
  ).insertWithReceipt(
    ctx,
    model,
    panel,
    code,
    { tag: 'gpu-hygiene-delete-variable', key: `delete-variable:${root.name}` },
    {
      done: trans.__('Deleted %1', plain.join(', ')),
      toRun: trans.__('Run the inserted cell to delete %1.', plain.join(', ')),
      // a name the cell kept (it changed since the finding) still holds
      stillHeld: after => stillNamed(after, plain, trans)
    }
  );
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
  root: IRootBytes,
  code: string
): Promise<'move' | 'delete' | null> {
  const { trans } = ctx;
  const shared = sumBytes(root.shared ?? {});
  const name = asCode(root.name);
  const result = await showDialog({
    title: (
      <span>
        {withCode(trans.__('Move the CUDA tensors of %1 to the CPU?', name))}
      </span>
    ),
    body: confirmBody(
      trans.__(
        'A cell is inserted below the active cell that replaces the CUDA tensors in %1 (the tensor itself, or those in its list, dict or tuple) by CPU copies (tensor.cpu()), or moves the model it names to the CPU (model.cpu()): the values stay; %1 alone keeps %2 of VRAM, freed unless something else holds it (the toast after the cell says what was). Or delete %1 if you no longer need it.',
        name,
        formatBytes(sumBytes(aloneOf(root)))
      ) +
        (shared > 0
          ? ` ${trans.__(
              '%1 more is shared with %2 and stays on the GPU while %2 holds it.',
              formatBytes(shared),
              (root.sharedWith ?? []).map(asCode).join(', ') ||
                trans.__('another holder')
            )}`
          : ''),
      code,
      trans
    ),
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
      const { model, panel, root } = variableTarget(ctx, args);
      const code = root
        ? generateMoveToCpuCell(root.name, aloneOf(root), root.valueId)
        : null;
      if (!panel || !root || code === null) {
        variableGone(ctx);
        return false;
      }
      const choice = await askMove(ctx, root, code);
      if (choice === 'delete') {
        return deleteVariable(ctx, model, panel, root, false);
      }
      if (choice === null) {
        return false;
      }
      await (
        await receiptModule()
      ).insertWithReceipt(
        ctx,
        model,
        panel,
        code,
        { tag: 'gpu-hygiene-move-to-cpu', key: `move-to-cpu:${root.name}` },
        {
          done: trans.__('Moved the CUDA tensors of %1 to the CPU', root.name),
          toRun: trans.__(
            'Run the inserted cell to move the CUDA tensors of %1 to the CPU.',
            root.name
          ),
          // its CPU copies are not what it frees: VRAM only
          devices: isCudaDevice,
          stillHeld: after => {
            const left = after.roots.find(
              r => r.kind === 'variable' && r.name === root.name
            );
            const vram = left ? sumBytes(left.bytes, isCudaDevice) : 0;
            return vram > 0
              ? trans.__(
                  '%1 still holds %2 of VRAM',
                  root.name,
                  formatBytes(vram)
                )
              : null;
          }
        }
      );
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
      const { model, panel, root, also, bytes } = variableTarget(ctx, args);
      if (!panel || !root || !also) {
        variableGone(ctx);
        return false;
      }
      return deleteVariable(ctx, model, panel, root, true, also, bytes);
    }
  });
}

/** Register the variable rows' Move to CPU… and Delete… commands. */
export function addVariableCommands(ctx: ICommandContext): void {
  addMoveToCpu(ctx);
  addDeleteVariable(ctx);
}
