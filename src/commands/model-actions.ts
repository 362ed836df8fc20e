/**
 * The VRAM panel's model rows: Free Stale Model (drop only the stale
 * references) and Delete Variables Holding Model… (`del` the names, then the
 * clean tail).
 */
import { Notification } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { formatBytes, sumBytes } from '../analysis/format';
import { deletableNames } from '../analysis/memory/holders';
import { isPythonIdentifier } from '../analysis/python';
import { CLEAN_ACTION } from '../action-cells';
import type { GpuKernelModel } from '../model';
import type { IInventory, IModelInfo } from '../protocol';
import { CommandIDs } from '../tokens';
import { deleteArgs, modelArgs } from './args';
import type { ICommandContext } from './context';
import { asCode } from './confirm';

/**
 * The variables the delete command deletes for `model`: `requested` (a
 * finding's owner, e.g. `trainer` holding it as `trainer.model`) kept only
 * where a user-variable holder of the model has that name and it is a
 * Python identifier; without `requested`, {@link deletableNames}.
 */
export function namesToDelete(model: IModelInfo, requested: unknown): string[] {
  if (!Array.isArray(requested)) {
    return deletableNames(model);
  }
  const roots = new Set(
    model.holders.filter(h => h.kind === 'variable').map(h => h.name)
  );
  return [
    ...new Set(
      requested.filter(
        (n): n is string =>
          typeof n === 'string' && roots.has(n) && isPythonIdentifier(n)
      )
    )
  ];
}

/** What a model row's command acts on; each part null where absent. */
export interface IModelTarget {
  model: GpuKernelModel | null;
  panel: NotebookPanel | null;
  inventory: IInventory | null;
  info: IModelInfo | null;
}

/** The kernel model, its notebook and the inventory entry named by `args.modelId`. */
export function modelTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; modelId?: unknown }
): IModelTarget {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  const inventory = model?.inventory ?? null;
  const info = inventory?.models.find(m => m.id === args.modelId) ?? null;
  return { model, panel, inventory, info };
}

/** Say that the model a row named is gone. */
export function modelGone(ctx: ICommandContext): void {
  const { trans } = ctx;
  Notification.warning(
    trans.__(
      'That model is no longer alive in the kernel; the VRAM panel shows the latest inventory.'
    ),
    { autoClose: 5000 }
  );
}

/** Register Free Stale Model. */
function addFreeModel(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.freeModel, {
    label: trans.__('Free Stale Model'),
    caption: trans.__(
      'Insert and run a cell that drops only the references (output cache, last traceback) that keep this stale model alive'
    ),
    describedBy: modelArgs,
    isEnabled: args => {
      const { panel, info } = modelTarget(ctx, args);
      return !!panel && !!info?.stale;
    },
    execute: async args => {
      const { panel, inventory, info } = modelTarget(ctx, args);
      if (!panel || !info || !info.stale) {
        modelGone(ctx);
        return;
      }
      const { generateCleanCell, planClean } =
        await import('../analysis/codegen/clean-cell');
      const code = generateCleanCell(
        planClean(inventory, { modelId: info.id })
      );
      await ctx.insert(panel, code, {
        tag: CLEAN_ACTION.tag,
        key: `free:${info.id}`
      });
    }
  });
}

/** Ask whether to delete `names`, which hold `info`. */
function confirmDelete(
  ctx: ICommandContext,
  names: string[],
  info: IModelInfo,
  code: string
): Promise<boolean> {
  const { trans } = ctx;
  const listed = names.map(asCode).join(', ');
  return ctx.confirm(
    trans._n(
      'Delete the variable %2?',
      'Delete the variables %2?',
      names.length,
      listed
    ),
    trans.__(
      'A cell running "del %1" is inserted below the active cell, then the output-cache entries that hold %2 (%3) are dropped and PyTorch’s cache is emptied. The model is freed unless something else still holds it. You can no longer use %1 afterwards.',
      listed,
      info.label,
      formatBytes(sumBytes(info.bytes))
    ),
    trans.__('Delete'),
    code
  );
}

/** Register Delete Variables Holding Model…. */
function addDeleteModel(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.deleteModel, {
    label: trans.__('Delete Variables Holding Model…'),
    caption: trans.__(
      'Ask, then insert and run a cell that deletes the variables naming this model and frees it'
    ),
    describedBy: deleteArgs,
    isEnabled: args => {
      const { panel, info } = modelTarget(ctx, args);
      return !!panel && !!info && namesToDelete(info, args.names).length > 0;
    },
    execute: async args => {
      const { panel, inventory, info } = modelTarget(ctx, args);
      if (!panel || !info) {
        modelGone(ctx);
        return false;
      }
      const names = namesToDelete(info, args.names);
      if (!names.length) {
        Notification.error(
          trans.__(
            'No variable that can be deleted names this model: its holders are not plain Python names.'
          ),
          { autoClose: 5000 }
        );
        return false;
      }
      const { generateCleanCell, planClean } =
        await import('../analysis/codegen/clean-cell');
      const code = generateCleanCell(
        planClean(inventory, { modelId: info.id, deleteNames: names })
      );
      if (!(await confirmDelete(ctx, names, info, code))) {
        return false;
      }
      await ctx.insert(panel, code, {
        tag: CLEAN_ACTION.tag,
        key: `delete:${[...names].sort().join(',')}`
      });
      return true;
    }
  });
}

/** Register the model rows' Free and Delete… commands. */
export function addModelCommands(ctx: ICommandContext): void {
  addFreeModel(ctx);
  addDeleteModel(ctx);
}
