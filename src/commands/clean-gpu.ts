/**
 * Clean GPU: insert (and run) the clear_gpu cell that frees what stale
 * references hold (output cache, last traceback) and empties PyTorch's cache.
 */
import { Notification } from '@jupyterlab/apputils';
import { gpuCleanIcon } from '../icons';
import { CommandIDs } from '../tokens';
import { kernelArgs } from './args';
import type { ICommandContext } from './context';

/** Register Clean GPU. */
export function addCleanCommand(ctx: ICommandContext): void {
  const { monitor, trans } = ctx;
  ctx.commands.addCommand(CommandIDs.clean, {
    label: trans.__('Clean GPU'),
    caption: trans.__(
      'Insert and run a cell that frees VRAM held by stale references (output cache, last traceback), then empties PyTorch’s cache'
    ),
    describedBy: kernelArgs,
    icon: args => (args.isPalette ? undefined : gpuCleanIcon),
    isEnabled: args => {
      const model = ctx.modelFor(args);
      return (
        !!model && model.status !== 'unsupported' && !!monitor.panelFor(model)
      );
    },
    execute: async args => {
      const model = ctx.modelFor(args);
      const panel = model ? monitor.panelFor(model) : null;
      if (!model || !panel) {
        Notification.error(
          trans.__('Clean GPU: open a notebook with a Python kernel first.'),
          { autoClose: 5000 }
        );
        return;
      }
      if (model.status === 'unsupported') {
        Notification.error(
          trans.__(
            'Clean GPU: the kernel language (%1) is not supported.',
            model.language ?? '?'
          ),
          { autoClose: 5000 }
        );
        return;
      }
      // the cell's generator loads with the first cell it writes
      const { generateCleanCell, planClean } =
        await import('../analysis/codegen/clean-cell');
      await ctx.insert(panel, generateCleanCell(planClean(model.inventory)));
    }
  });
}
