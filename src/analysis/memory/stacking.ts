/**
 * The stacking rule: several live instances of the same kind of model in one
 * kernel, typically because a model cell was run again (or a second
 * `YOLO(...)` was loaded) while the first instance is still alive.
 */
import type { IHolder, IInventory, IModelInfo } from '../../protocol';
import { userModels } from '../findings/user-models';

/** One group of stacked instances, oldest first. */
export interface IStackedGroup {
  /** Grouping key: the family for ultralytics and transformers, the class for plain torch. */
  key: string;
  /** The newest instance (highest creation order). */
  newest: IModelInfo;
  /** Older instances still alive, oldest first. */
  older: IModelInfo[];
}

/**
 * Grouping key of a model. Ultralytics and transformers models stack by family
 * (a `yolov8s` loaded after a `yolov8n` counts); plain torch modules stack only
 * with the same class, so a GAN's generator and discriminator do not.
 */
export function stackingKey(model: IModelInfo): string {
  return model.family === 'torch'
    ? `torch:${model.module}.${model.className}`
    : model.family;
}

/**
 * Find stacked instances in an inventory. Only the models the user has
 * count ({@link userModels}): modules nothing reaches (the layers of a
 * collected model waiting in a reference cycle) and modules reached through
 * another model (its trainer's copies, a list touching its EMA) never make a
 * stack, nor does a deliberate copy a variable names (`copied`: an EMA or a
 * best checkpoint made with `copy.deepcopy`); a copy nothing names any more
 * still stacks (its older instance is a stale model).
 *
 * @returns one group per key with at least two live instances, ordered by the
 *   newest instance's creation order.
 */
export function findStackedModels(inventory: IInventory): IStackedGroup[] {
  const groups = new Map<string, IModelInfo[]>();
  for (const model of userModels(inventory)) {
    if (model.copied && !model.stale) {
      continue;
    }
    const key = stackingKey(model);
    const list = groups.get(key) ?? [];
    list.push(model);
    groups.set(key, list);
  }
  const result: IStackedGroup[] = [];
  for (const [key, models] of groups) {
    if (models.length < 2) {
      continue;
    }
    const sorted = [...models].sort((a, b) => a.order - b.order);
    result.push({
      key,
      newest: sorted[sorted.length - 1],
      older: sorted.slice(0, -1)
    });
  }
  return result.sort((a, b) => a.newest.order - b.newest.order);
}

/**
 * A signature of the stacked state: the same set of instances gives the same
 * string, so a toast is not raised again after every cell for one situation.
 */
export function stackingSignature(groups: IStackedGroup[]): string {
  return groups
    .map(g => [...g.older.map(m => m.id), g.newest.id].join(','))
    .join(';');
}

const KIND_RANK = { variable: 0, output: 1, traceback: 2, hidden: 3 };

function outputRank(name: string): number {
  if (name.startsWith('Out[')) {
    return 0;
  }
  return /^_\d+$/.test(name) ? 1 : 2;
}

/** 0 for a holder that names the object itself (path = root), else 1. */
function indirect(holder: IHolder): number {
  return holder.path === holder.name ? 0 : 1;
}

/**
 * Holders in display order: user variables first, then the output cache
 * (`Out[n]`, `_n`, then `_`, `__`, `___`), the last traceback, hidden; within
 * a kind, roots that name the object itself before longer paths.
 */
export function sortHolders(holders: ReadonlyArray<IHolder>): IHolder[] {
  return [...holders].sort(
    (a, b) =>
      KIND_RANK[a.kind] - KIND_RANK[b.kind] ||
      indirect(a) - indirect(b) ||
      (a.kind === 'output' ? outputRank(a.name) - outputRank(b.name) : 0) ||
      a.name.length - b.name.length ||
      a.name.localeCompare(b.name) ||
      a.path.length - b.path.length ||
      a.path.localeCompare(b.path)
  );
}

/**
 * Names of the holders of a model for display: user variables first, then the
 * output cache (`Out[n]`, `_n`, then `_`, `__`, `___`), the last traceback,
 * hidden — e.g. `["Out[2]", "_2", "__"]`.
 */
export function holderNames(model: IModelInfo): string[] {
  return sortHolders(model.holders).map(h => h.name);
}

/**
 * Paths from the holders to a model, in the order of {@link holderNames} and
 * once each — e.g. `["runs[0].model", "Out[2]"]`. A path is the root name
 * followed by attributes and items (`model.trainer.ema.ema`).
 */
export function holderPaths(model: IModelInfo): string[] {
  return [...new Set(sortHolders(model.holders).map(h => h.path || h.name))];
}
