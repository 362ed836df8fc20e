/**
 * Owner object: a user variable that is a plain object (not a model)
 * holding a model and, next to it, its EMA copy, optimizer state or tensors
 * (`owners`: a hand-written trainer, a Hugging Face or Lightning
 * `Trainer`). One finding per owner, "trainer (Trainer) holds a model
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
 * Severity: the one scale (`./severity.ts`) on what deleting it frees;
 * info when that is nothing (held elsewhere).
 *
 * The rule also tells models with optimizer state or model copies among
 * their own parts (an Ultralytics YOLO after `train()`): see
 * `model-parts.ts`.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type {
  IInventory,
  IModelInfo,
  IOwnerHolding,
  IOwnerObject
} from '../../protocol';
import { formatBytes, formatPlacement, sumBytes } from '../format';
import { isPythonIdentifier } from '../python';
import { modelOwnerFindings } from './model-parts';
import { addBytes, namesModel, ownerCopies, userModels } from './user-models';
import type { FindingFix, FindingRule, IFinding, PerDevice } from './types';
import { faultSeverity } from './severity';

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
 * What deleting an owner object's variable does, as the roots tell it (see
 * the file's comment).
 */
interface IOwnerDeletion {
  /** The owner's variable. */
  name: string;
  /** The other variables that name its model. */
  others: string[];
  /** The variables that reach what it holds too (its root's `sharedWith`). */
  keepers: string[];
  /** How the model reaches the owner's parts (`module._trainer`), or ''. */
  through: string;
  /** Another name reaches all it holds: deleting it alone frees nothing. */
  nothing: boolean;
  /** Only it names the model: "Delete <name>…" through the model's delete flow. */
  deletable: boolean;
  /** Others share the model: "Delete <name>…" of the variable alone frees its parts. */
  dropsParts: boolean;
  /** The finding's bytes per device: what deleting it frees, else all it holds. */
  freed: PerDevice;
}

/**
 * The listed user model an owner holds that is not one of its copies; null
 * when there is none or the owner holds nothing else.
 */
function ownedModel(
  owner: IOwnerObject,
  listed: ReadonlyMap<string, IModelInfo>
): IOwnerHolding | null {
  const first = owner.holds
    .filter(h => h.kind === 'model')
    .find(
      h =>
        h.id !== undefined &&
        listed.has(h.id) &&
        !ownerCopies(owner).includes(h)
    );
  return first && owner.holds.length >= 2 ? first : null;
}

/**
 * What the finding of `owner` shows as freed: what deleting it frees (its
 * root's `sole`, plus the model where the model's delete flow also drops
 * the output-cache entries that hold it, `Out[3]` after showing it, whose
 * share `sole` leaves out), else everything it holds.
 */
function freedBytes(
  owner: IOwnerObject,
  first: IOwnerHolding,
  model: IModelInfo | undefined,
  sole: PerDevice | null,
  frees: { deletable: boolean; byDeleting: boolean }
): PerDevice {
  if (sole === null || !frees.byDeleting) {
    const bytes: PerDevice = {};
    owner.holds.forEach(h => addBytes(bytes, h.bytes));
    return bytes;
  }
  const outputs = (model?.holders ?? []).some(h => h.kind === 'output');
  return frees.deletable && outputs ? addBytes({ ...sole }, first.bytes) : sole;
}

/** How the model reaches the owner's parts, through its first other name: `module._trainer`. */
function reachedVia(model: IModelInfo | undefined, namer: string | undefined) {
  return [
    ...new Set(
      (model?.parts ?? []).map(p => `${namer}.${p.path.split(/[.[]/)[0]}`)
    )
  ].join(', ');
}

/**
 * What deleting `owner` does; null for an owner whose parts beside the
 * model are only tensors that other names hold too (a trainer and its
 * dataset before training): nothing to tell.
 */
function ownerDeletion(
  owner: IOwnerObject,
  first: IOwnerHolding,
  model: IModelInfo | undefined,
  inventory: IInventory | null
): IOwnerDeletion | null {
  const name = owner.name;
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
  if (nothing && owner.holds.every(h => h === first || h.kind === 'tensor')) {
    return null;
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
  return {
    name,
    others,
    keepers: root?.sharedWith ?? [],
    through: reachedVia(model, namers[0]?.path),
    nothing,
    deletable,
    dropsParts,
    freed: freedBytes(owner, first, model, sole, {
      deletable,
      byDeleting: alone || dropsParts
    })
  };
}

/** The explanation of an owner's finding, by what deleting it does. */
function explainOwner(
  owner: IOwnerObject,
  d: IOwnerDeletion
): (trans: TranslationBundle) => string {
  const { name, others, keepers, through } = d;
  return trans => {
    const holdings = describeOwnerHoldings(owner, trans);
    if (d.deletable) {
      return trans.__(
        '%1 (%2) holds %3: deleting %1 frees %4.',
        name,
        owner.className,
        holdings,
        formatBytes(sumBytes(d.freed))
      );
    }
    if (d.dropsParts) {
      return trans._n(
        '%2 (%3) holds %4: deleting %2 frees %5; the model stays (%6 names it).',
        '%2 (%3) holds %4: deleting %2 frees %5; the model stays (%6 name it).',
        others.length,
        name,
        owner.className,
        holdings,
        formatBytes(sumBytes(d.freed)),
        others.join(', ')
      );
    }
    if (d.nothing && through) {
      return trans.__(
        '%1 (%2) holds %3, but %4 reaches them too (through %5): deleting %1 alone frees nothing.',
        name,
        owner.className,
        holdings,
        others.join(', '),
        through
      );
    }
    if (d.nothing && keepers.length) {
      return trans._n(
        '%2 (%3) holds %4, but %5 reaches them too: deleting %2 alone frees nothing.',
        '%2 (%3) holds %4, but %5 reach them too: deleting %2 alone frees nothing.',
        keepers.length,
        name,
        owner.className,
        holdings,
        keepers.join(', ')
      );
    }
    return trans.__('%1 (%2) holds %3.', name, owner.className, holdings);
  };
}

/** The fix of an owner's finding: the model's delete flow, the variable's, or none. */
function ownerFix(first: IOwnerHolding, d: IOwnerDeletion): FindingFix {
  if (d.deletable) {
    return { kind: 'delete', modelId: first.id!, names: [d.name] };
  }
  return d.dropsParts
    ? { kind: 'delete-variable', name: d.name }
    : { kind: 'none' };
}

/** The finding of one owner object, or null (see {@link ownerFindings}). */
function ownerFinding(
  owner: IOwnerObject,
  listed: ReadonlyMap<string, IModelInfo>,
  inventory: IInventory | null
): IFinding | null {
  const first = ownedModel(owner, listed);
  const d =
    first && ownerDeletion(owner, first, listed.get(first.id!), inventory);
  if (!first || !d) {
    return null;
  }
  const beside: PerDevice = {};
  owner.holds.filter(h => h !== first).forEach(h => addBytes(beside, h.bytes));
  // Everything it holds is reached by other names too: deleting it frees
  // nothing, so its bytes are shown as shared (never a warning, no toast).
  const heldElsewhere = d.nothing && d.keepers.length > 0;
  return {
    kind: 'owner-object',
    id: `owner-object:${d.name}`,
    // weighed by the rule (faultSeverity); held elsewhere frees nothing: info
    severity: heldElsewhere || sumBytes(beside) <= 0 ? 'info' : 'warning',
    subject: d.name,
    bytes: heldElsewhere ? {} : d.freed,
    ...(heldElsewhere
      ? { sharedBytes: d.freed, sharedWith: [...d.keepers] }
      : {}),
    explain: explainOwner(owner, d),
    evidence: owner.holds.map(
      h => `${h.path} (${h.className}): ${formatPlacement(h.bytes)}`
    ),
    fix: ownerFix(first, d)
  };
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
  return (inventory?.owners ?? []).flatMap(owner => {
    const finding = ownerFinding(owner, listed, inventory);
    return finding ? [finding] : [];
  });
}

/** The owner-object rule: one finding per owner object, and per model with optimizer state or model copies. */
export const ownerObjectRule: FindingRule = facts => {
  const owners = ownerFindings(facts.inventory);
  return [...owners, ...modelOwnerFindings(facts.inventory, owners)].map(f =>
    f.severity === 'warning'
      ? { ...f, severity: faultSeverity(f.bytes, facts) }
      : f
  );
};
