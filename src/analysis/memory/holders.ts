/**
 * "Who holds VRAM": one row per live model of an inventory, with the paths
 * that keep it alive, what hangs off it (trainer, EMA, optimizer state) and
 * what the panel can do about it; the bytes per root (with what no root
 * explains), and the largest loose tensors.
 */
import type {
  IInventory,
  IModelInfo,
  IPart,
  IRootBytes,
  ITensorInfo,
  RootKind
} from '../../protocol';
import { isPythonIdentifier } from '../python';
import { isCudaDevice, sumBytes } from '../format';
import { namesModel, ownerCopies, userModels } from '../findings/user-models';
import { holderNames, holderPaths } from './stacking';

/** A part of a model (`trainer.ema.ema`, `trainer.optimizer`) for display. */
export interface IPartRow {
  /** Path from the model, e.g. `trainer.ema.ema`. */
  path: string;
  /** `model`, `optimizer` (its state, e.g. momentum) or `tensor`. */
  kind: IPart['kind'];
  /** Class name, e.g. `DetectionModel`, `SGD`. */
  className: string;
  /** Bytes on all devices not already counted in the model or an earlier part. */
  bytes: number;
  /** Bytes per device, as the agent reported them. */
  perDevice: Record<string, number>;
}

/** One row of the holders table. */
export interface IHolderRow {
  /** The model as the agent reported it. */
  model: IModelInfo;
  /** Holder names for display, user variables first (`model`, `Out[2]`, `_2`, …). */
  holders: string[];
  /** Paths from the holders to the model, same order (`model`, `runs[0].model`, `Out[2]`). */
  paths: string[];
  /** What hangs off the model's attributes, in the agent's order. */
  parts: IPartRow[];
  /** Bytes of the parts, all devices. */
  partBytes: number;
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
 * statement: holders of kind `variable` that are Python identifiers and bind
 * the model itself (path = name; `del runs` to free `runs[0].model` would
 * delete more than the model; not a loop variable that holds one of its
 * layers, `submodule`), once each.
 */
export function deletableNames(model: IModelInfo): string[] {
  const names: string[] = [];
  for (const holder of model.holders) {
    if (
      namesModel(holder) &&
      holder.path === holder.name &&
      isPythonIdentifier(holder.name) &&
      !names.includes(holder.name)
    ) {
      names.push(holder.name);
    }
  }
  return names;
}

/** `Out[N]` with an int key N, as the agent names an output-cache entry. */
const OUT_ENTRY = /^Out\[(\d{1,9})\]$/;
/** IPython's other names of an output: `_N` and the display hook's slots. */
const OUTPUT_NAME = /^(?:_\d{1,9}|_{1,3})$/;

/**
 * The holders of `model` that the clean plan limited to it (the stale-model
 * finding's fix, the panel's Free; with `deleteNames`, Delete…) may leave
 * in place, by name: empty when the plan frees it. The clean cell pops the
 * model's `Out[N]` entries (int keys), then resets IPython's own names of
 * the very objects it popped (`_N`, `_`, `__`, `___`: only where IPython's
 * hidden namespace or display hook holds the same object, never a user's
 * own binding), clears the last traceback and deletes `deleteNames`. So it
 * leaves:
 * - an output-cache name that is no `Out[N]` of an int key (`Out['3']`, a
 *   key the user wrote);
 * - `_N`, `_`, `__`, `___` when no `Out[N]` holds the model (a user's own
 *   `_ = model`, or a copy `del Out[n]` left);
 * - a slot (`_`, `__`, `___`) whose root in the inventory also names cells
 *   that are not the model's (`cells`): the slot names two objects, the
 *   user's own binding beside IPython's, and the cell cannot tell which
 *   holds the model;
 * - a variable not in `deleteNames` (one that reaches only a layer of the
 *   model, `submodule`, keeps that layer, not the model), a hidden holder;
 * - what the agent found holding it outside the notebook's names
 *   (`outside.holder`, a module's global).
 *
 * A user module that holds a model the output cache also holds is not in
 * the inventory (the agent searches outside holders only for models no
 * name reaches): it is not seen here.
 */
export function cleanLeaves(
  model: IModelInfo,
  inventory: IInventory | null,
  deleteNames: ReadonlyArray<string> = []
): string[] {
  const cells = new Set<number>();
  for (const holder of model.holders) {
    const match = holder.kind === 'output' && OUT_ENTRY.exec(holder.name);
    if (match) {
      cells.add(Number(match[1]));
    }
  }
  const roots = new Map(
    (inventory?.roots ?? [])
      .filter(r => r.kind === 'output')
      .map(r => [r.name, r])
  );
  const leaves = (holder: IModelInfo['holders'][number]): boolean => {
    switch (holder.kind) {
      case 'traceback':
        return false;
      case 'variable': // a loop variable over its layers keeps that layer only
        return !holder.submodule && !deleteNames.includes(holder.name);
      case 'output': {
        if (OUT_ENTRY.test(holder.name)) {
          return false;
        }
        if (!OUTPUT_NAME.test(holder.name) || !cells.size) {
          return true;
        }
        const named = roots.get(holder.name)?.cells ?? [];
        return /^_+$/.test(holder.name) && named.some(c => !cells.has(c));
      }
      default:
        return true;
    }
  };
  return [
    ...new Set(model.holders.filter(leaves).map(h => h.name)),
    ...(model.outside?.holder ? [model.outside.holder] : [])
  ];
}

/**
 * The user variables that keep a model only through their own attributes
 * (a transformers `pipeline`'s `pipe.model`, any wrapper built on it; not a
 * container's item, `runs[0]`: deleting the list deletes more), when
 * no variable binds the model itself ({@link deletableNames} is empty) and
 * no such variable reaches another of the user's models: deleting them
 * frees the model; deleting the variable the model was once bound to would
 * free nothing. Python identifiers only, once each.
 */
export function wrapperNames(
  model: IModelInfo,
  inventory: IInventory | null
): string[] {
  if (deletableNames(model).length) {
    return [];
  }
  const others = new Set(
    userModels(inventory)
      .filter(m => m.id !== model.id)
      .flatMap(m => m.holders.filter(h => h.kind === 'variable'))
      .map(h => h.name)
  );
  const names: string[] = [];
  for (const holder of model.holders) {
    if (
      namesModel(holder) &&
      holder.path.startsWith(`${holder.name}.`) &&
      isPythonIdentifier(holder.name) &&
      !others.has(holder.name) &&
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
 * The models that are not the user's but an owner's copy of one of them
 * (`trainer.ema` next to `trainer.model`), as part rows of that model:
 * {model id: [part]}.
 */
function ownerCopyParts(
  inventory: IInventory,
  listed: ReadonlySet<string>
): Map<string, IPartRow[]> {
  const byId = new Map(inventory.models.map(m => [m.id, m]));
  const out = new Map<string, IPartRow[]>();
  for (const owner of inventory.owners ?? []) {
    const copies = ownerCopies(owner);
    for (const copy of copies) {
      const model = copy.id === undefined ? undefined : byId.get(copy.id);
      const host = owner.holds.find(
        h =>
          h.kind === 'model' &&
          !copies.includes(h) &&
          h.className === copy.className &&
          h.id !== undefined &&
          listed.has(h.id)
      );
      if (!model || listed.has(model.id) || !host?.id) {
        continue;
      }
      const parts = out.get(host.id) ?? [];
      parts.push({
        path: copy.path,
        kind: 'model',
        className: model.className,
        bytes: sumBytes(model.bytes),
        perDevice: model.bytes
      });
      out.set(host.id, parts);
    }
  }
  return out;
}

/**
 * Rows of the holders table: the user's models (`userModels`, the one
 * notion of model the gauge, toasts and findings use). An owner's copy of
 * a model (a hand-written trainer's `trainer.ema`) is a part row of that
 * model; modules nothing reaches are left to the `unreachable` finding.
 *
 * @param inventory - the latest inventory (null: no rows).
 * @param sort - column and direction; ties are broken by bytes (largest
 *   first), then creation order (oldest first), so the order is stable.
 */
export function holderRows(
  inventory: IInventory | null,
  sort: IHolderSort = DEFAULT_HOLDER_SORT
): IHolderRow[] {
  const models = userModels(inventory);
  const copies = inventory
    ? ownerCopyParts(inventory, new Set(models.map(m => m.id)))
    : new Map<string, IPartRow[]>();
  const rows: IHolderRow[] = models.map(model => {
    const holders = [...new Set(holderNames(model))];
    const parts = [
      ...(model.parts ?? []).map(part => ({
        path: part.path,
        kind: part.kind,
        className: part.className,
        bytes: sumBytes(part.bytes),
        perDevice: part.bytes
      })),
      ...(copies.get(model.id) ?? [])
    ];
    return {
      model,
      holders,
      paths: holderPaths(model),
      parts,
      partBytes: parts.reduce((sum, p) => sum + p.bytes, 0),
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

/** One root of the "who holds the bytes" table. */
export interface IRootRow {
  kind: RootKind;
  /** The root, e.g. `model`, `Out[2]`, `last traceback (train_step)`. */
  name: string;
  /** Bytes on the device shown (or on all devices without a GPU). */
  bytes: number;
  /** Bytes per device, as the agent reported them. */
  perDevice: Record<string, number>;
  /**
   * The user's models (`userModels`: the gauge's and the findings' notion)
   * this root reaches, whole or in part: 0 for the row of what nothing
   * names (modules nothing reaches are no models: the `unreachable`
   * finding counts them), never the agent's count of every module under
   * the root (submodules, layers outliving their model).
   */
  models: number;
  /** Loose tensors counted under this root (the agent's count). */
  tensors: number;
}

/** The bytes of an inventory by root, adding up to PyTorch allocated on a device. */
export interface IRootsSummary {
  /** Device the figures are for (`"cuda:0"`), or null: all devices (no GPU). */
  device: string | null;
  /** Roots with bytes there, largest first. */
  rows: IRootRow[];
  /**
   * Bytes on `device` that PyTorch allocated and no root reaches (cuBLAS
   * workspaces, tensors only C++ or a closed-over frame holds, memory behind
   * a cut walk), or null when not measured (no CUDA device, CUDA not initialised).
   */
  unattributed: number | null;
  /** Sum of the rows and `unattributed`: PyTorch allocated when the inventory was taken (CUDA). */
  total: number;
}

/**
 * Bytes by root for one device.
 *
 * @param device - a CUDA device name such as `"cuda:0"`, or null for all
 *   devices together (a kernel without GPU: the figures are RAM).
 * @returns null without an inventory.
 */
export function rootsSummary(
  inventory: IInventory | null,
  device: string | null
): IRootsSummary | null {
  if (!inventory) {
    return null;
  }
  const on = (perDevice: Record<string, number>): number =>
    device === null ? sumBytes(perDevice) : (perDevice[device] ?? 0);
  const models = userModels(inventory);
  const reached = (root: IRootBytes): number =>
    root.kind === 'hidden'
      ? 0
      : models.filter(m =>
          m.holders.some(h => h.kind === root.kind && h.name === root.name)
        ).length;
  const rows: IRootRow[] = (inventory.roots ?? [])
    .map((root: IRootBytes) => ({
      kind: root.kind,
      name: root.name,
      bytes: on(root.bytes),
      perDevice: root.bytes,
      models: reached(root),
      tensors: root.tensors
    }))
    .filter(row => row.bytes > 0)
    .sort((a, b) => b.bytes - a.bytes || a.name.localeCompare(b.name));
  const unattributed =
    device !== null && device in (inventory.unattributed ?? {})
      ? inventory.unattributed[device]
      : null;
  const total = rows.reduce((sum, r) => sum + r.bytes, 0) + (unattributed ?? 0);
  return { device, rows, unattributed, total };
}

/** Shape for display: `32×3×640×640`, or `scalar` for a 0-d tensor. */
export function formatShape(shape: ReadonlyArray<number>): string {
  return shape.length ? shape.join('×') : 'scalar';
}

/**
 * The largest loose tensors (outside any model), largest first.
 *
 * @param device - keep only tensors on this device (e.g. `"cuda:0"`), or null for all.
 */
export function tensorRows(
  inventory: IInventory | null,
  device: string | null = null
): ITensorInfo[] {
  return (inventory?.tensors ?? [])
    .filter(t => device === null || t.device === device)
    .sort((a, b) => b.bytes - a.bytes);
}
