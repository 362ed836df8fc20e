/**
 * Model parts: a model with optimizer state or model copies hanging off
 * its attributes (`trainer.ema.ema`, `trainer.optimizer`, `trainer.model`:
 * an Ultralytics YOLO after `train()`, a hand-written trainer), the model
 * half of the owner-object rule (`owner-object.ts`). One finding per model:
 * its path, what it holds with bytes ("a model copy (11.5 MiB), an EMA copy
 * (11.5 MiB), AdamW state (23.0 MiB)"), evidence (each part's path and
 * bytes) and the fix. Severity: the one scale (`./severity.ts`) on the
 * finding's bytes, applied by the owner-object rule.
 *
 * Fix, first that applies:
 * - an Ultralytics `YOLO` that a user variable names itself, with parts
 *   under `trainer.` (what `model.train()` leaves) that no other variable
 *   names ({@link partNamers}): "Drop the finished trainer, keep the model"
 *   (`drop-trainer`; bytes: the trainer's parts);
 * - "Delete <var>…" where one user variable holds the model through an
 *   attribute path (`trainer.model` → `trainer`; not a list such as
 *   `runs[0].model`, which may hold more) and no other variable reaches it,
 *   so that deleting it frees the model and its parts (bytes: both);
 * - else no button (bytes: the parts, what dropping the owner would return).
 *
 * Parts are parts: a copy that a user variable also names (`ema =
 * model.trainer.ema.ema`) is a holder of that part, never a second model
 * (`userModels`).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IInventory, IModelInfo, IPart } from '../../protocol';
import { formatBytes, formatPlacement, sumBytes } from '../format';
import { isPythonIdentifier } from '../python';
import { deletableNames } from '../memory/holders';
import {
  addBytes,
  modelAndParts,
  modelName,
  namesModel,
  reachedThrough,
  userModels
} from './user-models';
import type { IFinding, PerDevice } from './types';

/** Whether a part is an EMA copy: a model part whose path has an `ema` step. */
function isEma(part: IPart): boolean {
  return part.kind === 'model' && /(^|\.)ema(\.|$)/.test(part.path);
}

/**
 * What the parts are, with bytes, for the explanation: "a model copy
 * (11.5 MiB), an EMA copy (11.5 MiB), AdamW state (23.0 MiB)".
 */
export function describeHoldings(
  parts: ReadonlyArray<IPart>,
  trans: TranslationBundle
): string {
  return parts
    .map(p => {
      const bytes = formatBytes(sumBytes(p.bytes));
      if (p.kind === 'optimizer') {
        return trans.__('%1 state (%2)', p.className, bytes);
      }
      if (p.kind === 'model') {
        return isEma(p)
          ? trans.__('an EMA copy (%1)', bytes)
          : trans.__('a model copy (%1)', bytes);
      }
      return trans.__('tensors (%1)', bytes);
    })
    .join(', ');
}

/**
 * The variable for "Drop the finished trainer, keep the model", or null: an
 * Ultralytics `YOLO` wrapper named by a user variable itself, with parts
 * under `trainer.` (the state `model.train()` leaves on the wrapper).
 */
export function finishedTrainerOwner(model: IModelInfo): string | null {
  const trainer = (model.parts ?? []).some(
    p => p.path.startsWith('trainer.') && p.kind !== 'tensor'
  );
  if (model.family !== 'ultralytics' || model.className !== 'YOLO') {
    return null;
  }
  return trainer ? (deletableNames(model)[0] ?? null) : null;
}

/**
 * User variables other than the model's own holders that also name one of
 * its parts (`ema = model.trainer.ema.ema`, `trainer = model.trainer`): the
 * part's `holders`, or a model listed on its own that is reached through
 * `model`. Dropping `model.trainer` would not free what they name.
 */
export function partNamers(
  model: IModelInfo,
  inventory: IInventory | null
): string[] {
  const own = new Set(model.holders.filter(namesModel).map(h => h.name));
  const names = [
    // a copy the agent listed on its own (agents before 0.3.x)
    ...(inventory?.models ?? [])
      .filter(m => m !== model && reachedThrough(m, model))
      .flatMap(m => m.holders),
    // a part's own holders
    ...(model.parts ?? []).flatMap(p => p.holders ?? [])
  ]
    .filter(h => namesModel(h) && !own.has(h.name))
    .map(h => h.name);
  return [...new Set(names)];
}

/**
 * The finding of a YOLO whose finished trainer `dropper` names: "Drop the
 * finished trainer, keep the model", unless another variable names one of
 * the trainer's parts (which then stays after the drop: no button).
 */
function finishedTrainerFinding(
  model: IModelInfo,
  dropper: string,
  inventory: IInventory | null
): IFinding {
  const namers = partNamers(model, inventory);
  const held = (model.parts ?? []).filter(p => p.path.startsWith('trainer.'));
  const bytes: PerDevice = {};
  held.forEach(p => addBytes(bytes, p.bytes));
  return {
    kind: 'owner-object',
    id: `owner-object:${model.id}`,
    severity: 'warning', // weighed by the rule (faultSeverity)
    subject: `${dropper}.trainer`,
    bytes,
    explain: trans =>
      namers.length
        ? trans.__(
            '%1.trainer (finished) holds %2; %3 also names part of it: delete %3 first.',
            dropper,
            describeHoldings(held, trans),
            namers.join(', ')
          )
        : trans.__(
            '%1.trainer (finished) holds %2: dropping it keeps %1.',
            dropper,
            describeHoldings(held, trans),
            formatBytes(sumBytes(bytes)),
            modelName(model)
          ),
    evidence: held.map(
      p => `${dropper}.${p.path} (${p.className}): ${formatPlacement(p.bytes)}`
    ),
    fix: namers.length
      ? { kind: 'none' }
      : { kind: 'drop-trainer', modelId: model.id, name: dropper }
  };
}

/**
 * The one user variable that holds `model` through attribute paths only
 * (`trainer.model` → `trainer`; not `runs[0].model`, which may hold more),
 * a Python identifier; null when there is none or several.
 */
function attributeOwner(model: IModelInfo): string | null {
  const variables = model.holders.filter(namesModel);
  const roots = [...new Set(variables.map(h => h.name))];
  return roots.length === 1 &&
    isPythonIdentifier(roots[0]) &&
    variables.every(
      h => h.path.length > h.name.length && h.path[h.name.length] === '.'
    )
    ? roots[0]
    : null;
}

/**
 * The finding of a model with optimizer state or model copies among its
 * parts: "Delete <owner>…" when one variable holds it through an attribute
 * path ({@link attributeOwner}; bytes: the model and its parts), else no
 * button (bytes: the parts).
 */
function modelPartsFinding(model: IModelInfo): IFinding {
  const all = model.parts ?? [];
  const name = modelName(model);
  const partBytes: PerDevice = {};
  all.forEach(p => addBytes(partBytes, p.bytes));
  const owner = attributeOwner(model);
  const bytes = owner !== null ? modelAndParts(model) : partBytes;
  const where = model.holders.filter(namesModel)[0]?.path ?? name;
  const owners = [...new Set(all.map(p => p.path.split(/[.[]/)[0]))];
  const subject = owners.map(o => `${where}.${o}`).join(', ');
  return {
    kind: 'owner-object',
    id: `owner-object:${model.id}`,
    severity: 'warning', // weighed by the rule (faultSeverity)
    subject,
    bytes,
    explain: trans =>
      owner !== null
        ? trans.__(
            '%1 holds %2 together with %3: deleting %1 frees them all, %4.',
            owner,
            name,
            describeHoldings(all, trans),
            formatBytes(sumBytes(bytes))
          )
        : trans.__(
            '%1 keeps %2 next to %3: %4.',
            subject,
            describeHoldings(all, trans),
            name,
            formatBytes(sumBytes(partBytes))
          ),
    evidence: all.map(
      p => `${p.path} (${p.className}): ${formatPlacement(p.bytes)}`
    ),
    fix:
      owner !== null
        ? { kind: 'delete', modelId: model.id, names: [owner] }
        : { kind: 'none' }
  };
}

/**
 * One finding per model with optimizer state or model copies among its
 * parts, but for a model that an owner's finding (`owners`) tells already.
 * A stale model's parts go with it: the stale-model finding frees both.
 */
export function modelOwnerFindings(
  inventory: IInventory | null,
  owners: IFinding[]
): IFinding[] {
  const ownedBy = new Map(
    (inventory?.owners ?? []).flatMap(o =>
      o.holds.filter(h => h.kind === 'model').map(h => [h.id, o.name])
    )
  );
  return userModels(inventory)
    .filter(model => !owners.some(f => f.subject === ownedBy.get(model.id)))
    .filter(
      model =>
        !model.stale &&
        (model.parts ?? []).some(
          p => p.kind === 'optimizer' || p.kind === 'model'
        )
    )
    .map(model => {
      const dropper = finishedTrainerOwner(model);
      return dropper !== null
        ? finishedTrainerFinding(model, dropper, inventory)
        : modelPartsFinding(model);
    });
}
