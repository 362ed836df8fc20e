/**
 * Drop Finished Trainer, Keep Model…: set `<yolo>.trainer = None` on a YOLO
 * whose model.train() has finished, freeing the trainer's copies and state.
 */
import { formatBytes, sumBytes } from '../analysis/format';
import { deletableNames } from '../analysis/memory/holders';
import {
  describeHoldings,
  finishedTrainerOwner
} from '../analysis/findings/model-parts';
import {
  generateDropTrainerCell,
  holdingLabels
} from '../analysis/codegen/drop-trainer-cell';
import type { IModelInfo, IPart } from '../protocol';
import { CommandIDs } from '../tokens';
import { dropTrainerArgs } from './args';
import type { ICommandContext } from './context';
import { asCode } from './confirm';
import { modelGone, modelTarget } from './model-actions';

/** The receipt's module (with the toasts' texts it uses): loaded when a fix runs, off JupyterLab's start path. */
const receiptModule = () => import('./receipt');

/**
 * The variable whose finished Ultralytics trainer the drop-trainer command
 * drops, or null: `requested` when it is a user variable naming `model`
 * itself, else the first such variable; null for a model without a
 * finished trainer ({@link finishedTrainerOwner}).
 */
export function trainerOwner(
  model: IModelInfo,
  requested: unknown
): string | null {
  const first = finishedTrainerOwner(model);
  if (first === null) {
    return null;
  }
  return typeof requested === 'string' &&
    deletableNames(model).includes(requested)
    ? requested
    : first;
}

/** Ask whether to drop the trainer of `name`, which holds `held` (`bytes` in all). */
function confirmDrop(
  ctx: ICommandContext,
  name: string,
  held: IPart[],
  bytes: number,
  code: string
): Promise<boolean> {
  const { trans } = ctx;
  return ctx.confirm(
    trans.__('Drop the finished trainer of %1?', asCode(name)),
    trans.__(
      'A cell setting "%1.trainer = None" is inserted below the active cell: the trainer keeps %2 (%3), freed unless something else holds it, and %1 stays, still predicting, validating and exporting. The toast after the cell says what was freed. A new %1.train() builds a new trainer.',
      asCode(name),
      formatBytes(bytes),
      describeHoldings(held, trans)
    ),
    trans.__('Drop trainer'),
    code
  );
}

/** Register Drop Finished Trainer, Keep Model…. */
export function addTrainerCommand(ctx: ICommandContext): void {
  const { trans } = ctx;
  ctx.commands.addCommand(CommandIDs.dropTrainer, {
    label: trans.__('Drop Finished Trainer, Keep Model…'),
    caption: trans.__(
      'Ask, then insert and run a cell that drops what a finished model.train() left on the YOLO (the trainer, its model and EMA copies, optimizer state, dataloaders); the model keeps working'
    ),
    describedBy: dropTrainerArgs,
    isEnabled: args => {
      const { panel, info } = modelTarget(ctx, args);
      return !!panel && !!info && trainerOwner(info, args.name) !== null;
    },
    execute: async args => {
      const { panel, info } = modelTarget(ctx, args);
      const name = info ? trainerOwner(info, args.name) : null;
      if (!panel || !info || name === null) {
        modelGone(ctx);
        return false;
      }
      const held = (info.parts ?? []).filter(p =>
        p.path.startsWith('trainer.')
      );
      const bytes = held.reduce((sum, p) => sum + sumBytes(p.bytes), 0);
      const code = generateDropTrainerCell({
        name,
        holds: holdingLabels(held),
        bytes,
        valueId: info.holders.find(
          h => h.kind === 'variable' && h.name === name
        )?.valueId
      });
      if (code === null) {
        return false;
      }
      if (!(await confirmDrop(ctx, name, held, bytes, code))) {
        return false;
      }
      await (
        await receiptModule()
      ).insertWithReceipt(
        ctx,
        ctx.modelFor(args),
        panel,
        code,
        { tag: 'gpu-hygiene-drop-trainer', key: `drop-trainer:${name}` },
        {
          done: trans.__('Dropped the finished trainer of %1', name),
          toRun: trans.__(
            'Run the inserted cell to drop the finished trainer of %1.',
            name
          ),
          // the same model (by id) still has parts under its trainer
          stillHeld: after => {
            const left = (
              after.models.find(m => m.id === info.id)?.parts ?? []
            ).filter(p => p.path.startsWith('trainer.'));
            return left.length
              ? trans.__(
                  '%1.trainer still holds %2',
                  name,
                  formatBytes(
                    left.reduce((sum, p) => sum + sumBytes(p.bytes), 0)
                  )
                )
              : null;
          }
        }
      );
      return true;
    }
  });
}
