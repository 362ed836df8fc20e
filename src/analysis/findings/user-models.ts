/**
 * One notion of "model" for everything the user sees (gauge, toasts, panel,
 * findings): a root of the live module forest that something reaches. Not
 * models, although the agent lists them:
 * - modules nothing reaches (every holder `hidden`): submodules that
 *   outlived their parent in a reference cycle, or a model that `del`
 *   dropped but a cycle keeps; they are one `unreachable` finding;
 * - a module that some holder reaches through another listed model's path
 *   (`model.trainer.ema.ema` while `model` names the YOLO), even if a loop
 *   variable or a list also touches it: it is that model's part (unless the
 *   two reach each other: then both stay models). A user variable that
 *   names such a copy directly (`ema = model.trainer.ema.ema`) is a holder
 *   of that part, not a second model;
 * - a copy that an owner object holds next to its model (`trainer.ema`, a
 *   deep copy of `trainer.model`: same class and parameter count), reached
 *   by no other variable: a part of the owner.
 */
import type {
  IHolder,
  IInventory,
  IModelInfo,
  IOwnerHolding,
  IOwnerObject
} from '../../protocol';
import { isCudaDevice } from '../format';
import type { PerDevice } from './types';

/**
 * Whether a holder is a user variable that names the model (or holds it
 * through a path), not one that reaches only a submodule of it (a loop
 * variable over its layers, `layers = list(model.modules())`: `submodule`).
 */
export function namesModel(holder: IHolder): boolean {
  return holder.kind === 'variable' && !holder.submodule;
}

/** Whether nothing reaches a model: every holder is `hidden` (found unreachable, or not found). */
export function isHiddenOnly(model: IModelInfo): boolean {
  return model.holders.every(h => h.kind === 'hidden');
}

/** Whether `path` goes deeper than `base`: `model.trainer` under `model`, `runs[0]` under `runs`. */
function under(path: string, base: string): boolean {
  return (
    path.length > base.length &&
    path.startsWith(base) &&
    (path[base.length] === '.' || path[base.length] === '[')
  );
}

/**
 * Whether `model` is reached through `other`: one of its holders' paths
 * goes through a path that reaches `other` from the same root
 * (`model.trainer.ema.ema` through `model`).
 */
export function reachedThrough(model: IModelInfo, other: IModelInfo): boolean {
  const bases = other.holders.filter(h => h.kind !== 'hidden');
  return model.holders.some(
    (h: IHolder) =>
      h.kind !== 'hidden' &&
      bases.some(b => b.name === h.name && under(h.path, b.path))
  );
}

/**
 * The copies among an owner object's models (`trainer.ema` next to
 * `trainer.model`): each model after the first of the same class and
 * parameter count, in attribute order. The first is the model.
 */
export function ownerCopies(owner: IOwnerObject): IOwnerHolding[] {
  const firsts = new Set<string>();
  return owner.holds.filter(h => {
    if (h.kind !== 'model') {
      return false;
    }
    const key = `${h.className}:${h.parameters ?? 0}`;
    if (!firsts.has(key)) {
      firsts.add(key);
      return false;
    }
    return true;
  });
}

/**
 * Whether `model` is a copy inside an owner object ({@link ownerCopies})
 * that no user variable reaches except through that owner: a part.
 */
function isOwnerCopy(model: IModelInfo, owners: IOwnerObject[]): boolean {
  return owners.some(
    owner =>
      ownerCopies(owner).some(c => c.id === model.id) &&
      model.holders.filter(namesModel).every(h => h.name === owner.name)
  );
}

/**
 * The models the user has: the inventory's models without those nothing
 * reaches, without those reached through another listed model (parts) and
 * without the copies an owner object holds next to its model (its EMA
 * copy, {@link ownerCopies}). In the agent's order.
 */
export function userModels(inventory: IInventory | null): IModelInfo[] {
  const models = inventory?.models ?? [];
  const owners = inventory?.owners ?? [];
  const reached = models.filter(
    m => !isHiddenOnly(m) && !isOwnerCopy(m, owners)
  );
  // Two models that reach each other (a.peer = b, b.peer = a) both stay.
  return reached.filter(
    m =>
      !reached.some(
        other =>
          other !== m && reachedThrough(m, other) && !reachedThrough(other, m)
      )
  );
}

/** Add `perDevice` into `into` (mutates and returns `into`). */
export function addBytes(into: PerDevice, perDevice: PerDevice): PerDevice {
  for (const [device, value] of Object.entries(perDevice)) {
    if (value > 0) {
      into[device] = (into[device] ?? 0) + value;
    }
  }
  return into;
}

/** A model's own bytes plus its parts' (each storage once, as the agent counted them). */
export function modelAndParts(model: IModelInfo): PerDevice {
  const bytes = addBytes({}, model.bytes);
  for (const part of model.parts ?? []) {
    addBytes(bytes, part.bytes);
  }
  return bytes;
}

/** The most bytes on one CUDA device (0 when none). */
export function maxCudaBytes(perDevice: PerDevice): number {
  return Math.max(
    0,
    ...Object.entries(perDevice)
      .filter(([device]) => isCudaDevice(device))
      .map(([, value]) => value)
  );
}

/** Model display name for findings: `YOLO (yolov8n.yaml)` (the agent's label). */
export function modelName(model: IModelInfo): string {
  return model.label || model.className;
}
