/**
 * "Who holds VRAM": one row per live model of an inventory, with what keeps
 * it alive and what the panel can do about it.
 */
import type { IInventory, IModelInfo } from '../protocol';
import { isPythonIdentifier } from './cleanup';
import { isCudaDevice, sumBytes } from './format';
import { holderNames } from './stacking';

/** One row of the holders table. */
export interface IHolderRow {
  /** The model as the agent reported it. */
  model: IModelInfo;
  /** Holder names for display, user variables first (`model`, `Out[2]`, `_2`, …). */
  holders: string[];
  /** Family for display: `YOLO` for Ultralytics, else the class name. */
  kind: string;
  /** Bytes on all devices (parameters, buffers and gradients; shared storages once). */
  bytes: number;
  /** Bytes on CUDA devices. */
  cudaBytes: number;
  /** `stale`: no user variable reaches it (free it); `named`: a variable does (delete it, if asked). */
  state: 'stale' | 'named';
  /** Variables that name the model and can be written as Python names (for "delete…"). */
  deletable: string[];
}

/** Column the holders table is sorted by. */
export type HolderSortKey = 'bytes' | 'holder' | 'kind' | 'state';

/** Sort order of the holders table. */
export interface IHolderSort {
  key: HolderSortKey;
  /** `desc` puts the largest (or last in alphabetical order) first. */
  direction: 'asc' | 'desc';
}

/** Default order: largest first. */
export const DEFAULT_HOLDER_SORT: IHolderSort = {
  key: 'bytes',
  direction: 'desc'
};

/**
 * The user variables that name a model and may be written in a `del`
 * statement: holders of kind `variable` that are Python identifiers, once each.
 */
export function deletableNames(model: IModelInfo): string[] {
  const names: string[] = [];
  for (const holder of model.holders) {
    if (
      holder.kind === 'variable' &&
      isPythonIdentifier(holder.name) &&
      !names.includes(holder.name)
    ) {
      names.push(holder.name);
    }
  }
  return names;
}

/** Display name of a model's kind, as the toasts use it. */
export function modelKind(model: IModelInfo): string {
  return model.family === 'ultralytics' ? 'YOLO' : model.className;
}

/**
 * Rows of the holders table.
 *
 * @param inventory - the latest inventory (null: no rows).
 * @param sort - column and direction; ties are broken by bytes (largest
 *   first), then creation order (oldest first), so the order is stable.
 */
export function holderRows(
  inventory: IInventory | null,
  sort: IHolderSort = DEFAULT_HOLDER_SORT
): IHolderRow[] {
  const rows: IHolderRow[] = (inventory?.models ?? []).map(model => {
    const holders = [...new Set(holderNames(model))];
    return {
      model,
      holders,
      kind: modelKind(model),
      bytes: sumBytes(model.bytes),
      cudaBytes: sumBytes(model.bytes, isCudaDevice),
      state: model.stale ? 'stale' : 'named',
      deletable: model.stale ? [] : deletableNames(model)
    };
  });
  const sign = sort.direction === 'asc' ? 1 : -1;
  const compare = (a: IHolderRow, b: IHolderRow): number => {
    switch (sort.key) {
      case 'bytes':
        return a.bytes - b.bytes;
      case 'holder':
        return (a.holders[0] ?? '').localeCompare(b.holders[0] ?? '');
      case 'kind':
        return a.kind.localeCompare(b.kind);
      case 'state':
        return a.state.localeCompare(b.state);
    }
  };
  return rows.sort(
    (a, b) =>
      sign * compare(a, b) || b.bytes - a.bytes || a.model.order - b.model.order
  );
}
