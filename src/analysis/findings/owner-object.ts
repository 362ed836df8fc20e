/**
 * Owner object: a model with optimizer state or model copies hanging off
 * its attributes (`trainer.ema.ema`, `trainer.optimizer`, `trainer.model`:
 * an Ultralytics YOLO after `train()`, a hand-written trainer). One finding
 * per owner: its path, what it holds with bytes ("a model copy (11.5 MiB),
 * an EMA copy (11.5 MiB), AdamW state (23.0 MiB)"), evidence (each part's
 * path and bytes) and the fix. Warning when the parts hold at least
 * {@link OWNER_WARN_BYTES} on one CUDA device, else info.
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
 * Owner objects that are not models (`owners`: a hand-written trainer, a
 * Hugging Face or Lightning `Trainer`, holding a model, its EMA copy,
 * optimizer state): one finding per owner, "trainer (Trainer) holds a model
 * (4.0 MiB, of which 2.0 MiB gradients), an EMA copy (2.0 MiB), AdamW state
 * (4.0 MiB): deleting trainer frees 10.0 MiB". What deleting it frees is
 * what only it reaches (its root's `sole`). Fix, first that applies:
 * - no other variable names its model: "Delete trainer…" through the
 *   model's delete flow (the model goes too);
 * - another variable names the model (`model` next to a Hugging Face
 *   `trainer`) and the roots say they share it: "Delete trainer…" of the
 *   variable alone, when that frees something (the optimizer state; the
 *   model stays);
 * - else no button; when nothing is the owner's alone (a Lightning
 *   `module` reaches its `trainer` through `module._trainer`), the
 *   explanation says that deleting it alone frees nothing.
 *
 * Parts are parts: a copy that a user variable also names (`ema =
 * model.trainer.ema.ema`) is a holder of that part, never a second model
 * (`userModels`).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type {
  IInventory,
  IModelInfo,
  IOwnerObject,
  IPart
} from '../../protocol';
import { formatBytes, formatPlacement, sumBytes } from '../format';
import { isPythonIdentifier } from '../cleanup';
import { deletableNames } from '../holders';
import {
  addBytes,
  maxCudaBytes,
  modelAndParts,
  modelName,
  namesModel,
  ownerCopies,
  reachedThrough,
  userModels
} from './models';
import type { FindingFix, FindingRule, IFinding } from './types';

/** Parts on one CUDA device from which an owner object is a warning (64 MiB). */
export const OWNER_WARN_BYTES = 64 * 2 ** 20;

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
 * What an owner object holds, with bytes, for the explanation: "a model
 * (4.0 MiB, of which 2.0 MiB gradients), an EMA copy (2.0 MiB), AdamW
 * state (4.0 MiB), tensors (4.0 MiB)"; the tensors under all its
 * attributes are told once.
 */
export function describeOwnerHoldings(
  owner: IOwnerObject,
  trans: TranslationBundle
): string {
  const copies = new Set(ownerCopies(owner));
  // tensors under several attributes: one "tensors (…)", where the first is
  const tensors: Record<string, number> = {};
  owner.holds
    .filter(h => h.kind === 'tensor')
    .forEach(h => addBytes(tensors, h.bytes));
  const firstTensors = owner.holds.find(h => h.kind === 'tensor');
  return owner.holds
    .filter(h => h.kind !== 'tensor' || h === firstTensors)
    .map(h => {
      const bytes = formatBytes(sumBytes(h.bytes));
      if (h.kind === 'optimizer') {
        return trans.__('%1 state (%2)', h.className, bytes);
      }
      if (h.kind === 'tensor') {
        return trans.__('tensors (%1)', formatBytes(sumBytes(tensors)));
      }
      if (copies.has(h)) {
        return /(^|\.)ema(\.|$)/i.test(h.path)
          ? trans.__('an EMA copy (%1)', bytes)
          : trans.__('a model copy (%1)', bytes);
      }
      const grads = sumBytes(h.grads ?? {});
      return grads
        ? trans.__(
            'a model (%1, of which %2 gradients)',
            bytes,
            formatBytes(grads)
          )
        : trans.__('a model (%1)', bytes);
    })
    .join(', ');
}

/**
 * Findings of the owner objects the agent reported (`owners`): a user
 * variable that is a plain object holding a model and, next to it,
 * optimizer state, model copies or tensors (a hand-written trainer, a
 * library's `Trainer`). Fix (asks; identifiers only): "Delete trainer…"
 * through the model's delete flow when only it names the model, of the
 * variable alone when another name keeps the model (see the file's
 * comment); bytes: what deleting it frees (its root's `sole`), else
 * everything it holds (each storage once). None for an owner whose parts
 * beside the model are only tensors that other names hold too (a trainer
 * and its dataset before training).
 */
function ownerFindings(inventory: IInventory | null): IFinding[] {
  const listed = new Map(userModels(inventory).map(m => [m.id, m]));
  return (inventory?.owners ?? []).flatMap((owner): IFinding[] => {
    const models = owner.holds.filter(h => h.kind === 'model');
    const first = models.find(
      h =>
        h.id !== undefined &&
        listed.has(h.id) &&
        !ownerCopies(owner).includes(h)
    );
    if (!first || owner.holds.length < 2) {
      return [];
    }
    const bytes: Record<string, number> = {};
    owner.holds.forEach(h => addBytes(bytes, h.bytes));
    const beside: Record<string, number> = {};
    owner.holds
      .filter(h => h !== first)
      .forEach(h => addBytes(beside, h.bytes));
    const name = owner.name;
    const model = listed.get(first.id!);
    // Deleting the owner frees its model only if no other variable names it.
    const namers = (model?.holders ?? []).filter(
      h => namesModel(h) && h.name !== name
    );
    const others = [...new Set(namers.map(h => h.name))];
    const alone = others.length === 0;
    // What deleting it frees: what only it reaches, as its root says.
    const root = (inventory?.roots ?? []).find(
      r => r.kind === 'variable' && r.name === name
    );
    const sole = root ? addBytes({}, root.sole ?? root.bytes) : null;
    const nothing = !alone && sole !== null && sumBytes(sole) === 0;
    // Its model and data that other names hold too (a trainer before
    // training): nothing to tell.
    if (nothing && owner.holds.every(h => h === first || h.kind === 'tensor')) {
      return [];
    }
    // The other names share the model with the owner (the roots agree).
    const shared =
      !alone &&
      !nothing &&
      sole !== null &&
      others.every(o => (root?.sharedWith ?? []).includes(o));
    const identifier = isPythonIdentifier(name);
    const deletable = alone && identifier;
    const dropsParts = shared && identifier;
    // The model's delete flow also drops the output-cache entries that hold
    // the model (`Out[3]` after showing it), whose share the root's `sole`
    // leaves out.
    const outputs = (model?.holders ?? []).some(h => h.kind === 'output');
    const freed =
      sole === null || !(alone || dropsParts)
        ? bytes
        : deletable && outputs
          ? addBytes({ ...sole }, first.bytes)
          : sole;
    const fix: FindingFix = deletable
      ? { kind: 'delete', modelId: first.id!, names: [name] }
      : dropsParts
        ? { kind: 'delete-variable', name }
        : { kind: 'none' };
    // How the model reaches the owner's parts: `module._trainer`.
    const through = [
      ...new Set(
        (model?.parts ?? []).map(
          p => `${namers[0]?.path}.${p.path.split(/[.[]/)[0]}`
        )
      )
    ].join(', ');
    const keepers = root?.sharedWith ?? [];
    const holdings = (trans: TranslationBundle) =>
      describeOwnerHoldings(owner, trans);
    const explain = (trans: TranslationBundle): string => {
      if (deletable) {
        return trans.__(
          '%1 (%2) holds %3: deleting %1 frees %4.',
          name,
          owner.className,
          holdings(trans),
          formatBytes(sumBytes(freed))
        );
      }
      if (dropsParts) {
        return trans._n(
          '%2 (%3) holds %4: deleting %2 frees %5; the model stays (%6 names it).',
          '%2 (%3) holds %4: deleting %2 frees %5; the model stays (%6 name it).',
          others.length,
          name,
          owner.className,
          holdings(trans),
          formatBytes(sumBytes(freed)),
          others.join(', ')
        );
      }
      if (nothing && through) {
        return trans.__(
          '%1 (%2) holds %3, but %4 reaches them too (through %5): deleting %1 alone frees nothing.',
          name,
          owner.className,
          holdings(trans),
          others.join(', '),
          through
        );
      }
      if (nothing && keepers.length) {
        return trans._n(
          '%2 (%3) holds %4, but %5 reaches them too: deleting %2 alone frees nothing.',
          '%2 (%3) holds %4, but %5 reach them too: deleting %2 alone frees nothing.',
          keepers.length,
          name,
          owner.className,
          holdings(trans),
          keepers.join(', ')
        );
      }
      return trans.__(
        '%1 (%2) holds %3.',
        name,
        owner.className,
        holdings(trans)
      );
    };
    // Everything it holds is reached by other names too: deleting it frees
    // nothing, so its bytes are shown as shared (never a warning, no toast).
    const heldElsewhere = nothing && keepers.length > 0;
    return [
      {
        kind: 'owner-object',
        id: `owner-object:${name}`,
        severity:
          !heldElsewhere && maxCudaBytes(beside) >= OWNER_WARN_BYTES
            ? 'warning'
            : 'info',
        subject: name,
        bytes: heldElsewhere ? {} : freed,
        ...(heldElsewhere
          ? { sharedBytes: freed, sharedWith: [...keepers] }
          : {}),
        explain,
        evidence: owner.holds.map(
          h => `${h.path} (${h.className}): ${formatPlacement(h.bytes)}`
        ),
        fix
      }
    ];
  });
}

/** The owner-object rule: one finding per owner object, and per model with optimizer state or model copies. */
export const ownerObjectRule: FindingRule = ({ inventory }) => {
  const owners = ownerFindings(inventory);
  return [...owners, ...modelOwnerFindings(inventory, owners)];
};

/**
 * One finding per model with optimizer state or model copies among its
 * parts, but for a model that an owner's finding (`owners`) tells already.
 */
const modelOwnerFindings = (
  inventory: IInventory | null,
  owners: IFinding[]
): IFinding[] => {
  const ownedBy = new Map(
    (inventory?.owners ?? []).flatMap(o =>
      o.holds.filter(h => h.kind === 'model').map(h => [h.id, o.name])
    )
  );
  return userModels(inventory)
    .filter(model => !owners.some(f => f.subject === ownedBy.get(model.id)))
    .flatMap((model): IFinding[] => {
      const parts = (model.parts ?? []).filter(
        p => p.kind === 'optimizer' || p.kind === 'model'
      );
      // A stale model's parts go with it: the stale-model finding frees both.
      if (!parts.length || model.stale) {
        return [];
      }
      const all = model.parts ?? [];
      const name = modelName(model);
      const dropper = finishedTrainerOwner(model);
      if (dropper !== null) {
        // A part that another variable names stays after the drop: no button.
        const namers = partNamers(model, inventory);
        const held = all.filter(p => p.path.startsWith('trainer.'));
        const bytes: Record<string, number> = {};
        held.forEach(p => addBytes(bytes, p.bytes));
        return [
          {
            kind: 'owner-object',
            id: `owner-object:${model.id}`,
            severity:
              maxCudaBytes(bytes) >= OWNER_WARN_BYTES ? 'warning' : 'info',
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
                    name
                  ),
            evidence: held.map(
              p =>
                `${dropper}.${p.path} (${p.className}): ${formatPlacement(p.bytes)}`
            ),
            fix: namers.length
              ? { kind: 'none' }
              : { kind: 'drop-trainer', modelId: model.id, name: dropper }
          }
        ];
      }
      const partBytes: Record<string, number> = {};
      all.forEach(p => addBytes(partBytes, p.bytes));
      const variables = model.holders.filter(namesModel);
      const roots = [...new Set(variables.map(h => h.name))];
      const owner =
        roots.length === 1 &&
        isPythonIdentifier(roots[0]) &&
        variables.every(
          h => h.path.length > h.name.length && h.path[h.name.length] === '.'
        )
          ? roots[0]
          : null;
      const fix: FindingFix =
        owner !== null
          ? { kind: 'delete', modelId: model.id, names: [owner] }
          : { kind: 'none' };
      const bytes = owner !== null ? modelAndParts(model) : partBytes;
      const where = variables[0]?.path ?? modelName(model);
      const owners = [...new Set(all.map(p => p.path.split(/[.[]/)[0]))];
      const subject = owners.map(o => `${where}.${o}`).join(', ');
      return [
        {
          kind: 'owner-object',
          id: `owner-object:${model.id}`,
          severity:
            maxCudaBytes(partBytes) >= OWNER_WARN_BYTES ? 'warning' : 'info',
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
          fix
        }
      ];
    });
};
