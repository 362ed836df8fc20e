/**
 * Drop DataLoader Workers…: shut down the worker processes that user
 * variables (a DataLoader or its iterator) keep, and delete the variables.
 */
import { Notification } from '@jupyterlab/apputils';
import {
  generateDropWorkersCell,
  workersToDrop,
  type IWorkersToDrop
} from '../analysis/codegen/drop-workers-cell';
import { CommandIDs } from '../tokens';
import { workersArgs } from './args';
import type { ICommandContext } from './context';
import { asCode } from './confirm';

/** The kernel model's notebook and what `args.names` keep. */
function workersTarget(
  ctx: ICommandContext,
  args: { kernelId?: unknown; names?: unknown }
) {
  const model = ctx.modelFor(args);
  const panel = model ? ctx.monitor.panelFor(model) : null;
  return { panel, drop: workersToDrop(model?.inventory ?? null, args.names) };
}

/** Ask whether to shut down the workers of `drop` and delete its variables. */
function confirmDrop(
  ctx: ICommandContext,
  drop: IWorkersToDrop,
  code: string
): Promise<boolean> {
  const { trans } = ctx;
  const names = drop.names.map(asCode).join(', ');
  return ctx.confirm(
    trans._n(
      'Drop %2 and its workers?',
      'Drop %2 and their workers?',
      drop.names.length,
      names
    ),
    trans._n(
      'A cell is inserted below the active cell that shuts down %1 DataLoader worker process (pid %3) and deletes %2. You can no longer use %2 afterwards: create the DataLoader again to train.',
      'A cell is inserted below the active cell that shuts down %1 DataLoader worker processes (pids %3) and deletes %2. You can no longer use %2 afterwards: create the DataLoader again to train.',
      drop.pids.length,
      names,
      drop.pids.join(', ')
    ),
    trans.__('Drop'),
    code
  );
}

/** Register Drop DataLoader Workers…. */
export function addWorkersCommand(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.dropWorkers, {
    label: trans.__('Drop DataLoader Workers…'),
    caption: trans.__(
      'Ask, then insert and run a cell that shuts down the DataLoader workers these variables keep and deletes the variables'
    ),
    describedBy: workersArgs,
    isEnabled: args => {
      const { panel, drop } = workersTarget(ctx, args);
      return !!panel && drop.names.length > 0;
    },
    execute: async args => {
      const { panel, drop } = workersTarget(ctx, args);
      const code = generateDropWorkersCell(
        drop.names,
        drop.pids.length,
        drop.valueIds
      );
      if (!panel || code === null) {
        Notification.warning(
          trans.__(
            'Those variables no longer keep DataLoader workers; the VRAM panel shows the latest inventory.'
          ),
          { autoClose: 5000 }
        );
        return false;
      }
      if (!(await confirmDrop(ctx, drop, code))) {
        return false;
      }
      await ctx.insert(panel, code, {
        tag: 'gpu-hygiene-drop-workers',
        key: `drop-workers:${drop.names.join(',')}`
      });
      return true;
    }
  });
}
