/**
 * "Drop the finished trainer, keep the model": the cell that releases what
 * an Ultralytics `YOLO` keeps on its `trainer` attribute after
 * `model.train()` (the trainer's model, its EMA copy, the optimizer state,
 * the dataloaders and the validator) while the wrapper's own model, which
 * `train()` reloaded from the best or last checkpoint, keeps working.
 *
 * Checked against Ultralytics 8.4 (`ultralytics/engine/model.py`: `train()`
 * sets `self.trainer`, then `self.model, self.ckpt = load_checkpoint(...)`;
 * `Model.__init__` starts with `self.trainer = None`, so `None` is the
 * wrapper's own "no trainer" state and `model.train()` builds a new one).
 */
import type { IPart } from '../../protocol';
import {
  commentSafe,
  HELD_CHECK,
  helperHead,
  isPythonIdentifier,
  pyHeld
} from '../python';
import { formatBytes, sumBytes } from '../format';

/** First line of the drop-trainer cell (how tests and a re-run recognise it). */
export const DROP_TRAINER_MARKER = '# gpu-hygiene: drop_trainer';

/**
 * What parts are, with bytes, for a generated cell's comment (English, as
 * the code): `model copy 11.5 MiB`, `EMA copy 11.5 MiB`, `AdamW state
 * 23.0 MiB`, `tensors 1.0 MiB`.
 */
export function holdingLabels(parts: ReadonlyArray<IPart>): string[] {
  return parts.map(p => {
    const bytes = formatBytes(sumBytes(p.bytes));
    if (p.kind === 'optimizer') {
      return `${p.className} state ${bytes}`;
    }
    if (p.kind === 'model') {
      return /(^|\.)ema(\.|$)/.test(p.path)
        ? `EMA copy ${bytes}`
        : `model copy ${bytes}`;
    }
    return `tensors ${bytes}`;
  });
}

/** What the drop-trainer cell is generated for. */
export interface IDropTrainer {
  /** The user variable that names the YOLO wrapper (a Python identifier). */
  name: string;
  /** What the trainer holds, for the comment ({@link holdingLabels}). */
  holds: string[];
  /** Bytes the trainer's parts hold, all devices (the comment's "about"). */
  bytes: number;
  /**
   * The variable holder's `valueId`: the cell leaves the name alone when it
   * holds another object by then.
   */
  valueId?: string;
}

/**
 * The drop-trainer cell: commented, self-contained (it works without the
 * extension and is safe to re-run), 28 lines, comments within 79
 * columns. It closes the trainer's dataloaders (their workers), sets
 * `<name>.trainer = None`, collects garbage (the trainer sits in reference
 * cycles) and empties PyTorch's CUDA cache when CUDA is initialised. It
 * defines one helper and deletes it: no name is left in the namespace.
 *
 * @returns Python source, or null when `name` is not a Python identifier
 *   (only identifiers reach code).
 */
export function generateDropTrainerCell(target: IDropTrainer): string | null {
  const { name } = target;
  if (!isPythonIdentifier(name)) {
    return null;
  }
  return [
    DROP_TRAINER_MARKER,
    '# Inserted by jupyterlab-gpu-hygiene: drops what train() left on',
    commentSafe(`# ${name}.trainer, about ${formatBytes(target.bytes)}:`, 79),
    commentSafe(`# ${target.holds.join(', ') || 'its state'};`, 79),
    commentSafe(
      `# keeps ${name}: predict, val and export still work. Safe to re-run.`,
      79
    ),
    ...helperHead('_gpu_hygiene_drop_trainer', [
      `name="${name}"`,
      `held=${pyHeld(target.valueId)}`
    ]),
    '    import gc, sys',
    '    from IPython import get_ipython',
    '    ns = get_ipython().user_ns',
    ...HELD_CHECK,
    '    owner = ns.get(name)',
    '    trainer = getattr(owner, "trainer", None)',
    '    if trainer is not None:',
    '        for attr in ("train_loader", "test_loader"):',
    '            close = getattr(getattr(trainer, attr, None), "close", None)',
    '            if callable(close):',
    '                close()  # stops its worker processes',
    '        owner.trainer = None',
    '    del trainer',
    '    gc.collect()  # the trainer sits in reference cycles',
    '    torch = sys.modules.get("torch")',
    '    if torch is not None and torch.cuda.is_initialized():',
    '        torch.cuda.empty_cache()',
    '_gpu_hygiene_drop_trainer()',
    ''
  ].join('\n');
}
