/**
 * Findings: the agent's facts turned into what the user is told, by pure
 * rules, one file per fault kind ({@link FINDING_RULES}). Views render the
 * result of {@link findings} generically: the VRAM panel lists them all, the
 * gauge tooltip summarises them ({@link summarizeFindings}), toasts raise
 * the warnings above a size setting (`notifications/finding-toast.ts`).
 *
 * Adding a kind = one rule file, one line here, its `FindingKind`, a jest
 * spec; a new fact, if one is needed, goes through `protocol.ts` first.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { GpuKernelModel } from '../../model';
import { CommandIDs } from '../../tokens';
import { sumBytes } from '../format';
import { originsOfRoot } from '../memory/origins';
import { childProcessesRule } from './child-processes';
import { cudaContextRule } from './cuda-context';
import { cudaTensorsRule } from './cuda-tensors';
import { fragmentedCacheRule } from './fragmented-cache';
import { graphHolderRule } from './graph-holder';
import { heldOutsideRule } from './held-outside';
import { holderUnknownRule } from './holder-unknown';
import { keptErrorRule } from './kept-error';
import { modelCopyRule } from './model-copy';
import { namedOlderModelRule } from './named-older-model';
import { optimizerRule } from './optimizer';
import { outputTensorsRule } from './output-tensors';
import { ownerObjectRule } from './owner-object';
import { staleModelRule } from './stale-model';
import { tracebackTensorsRule } from './traceback-tensors';
import type { FindingFix, FindingRule, IFacts, IFinding } from './types';
import { unreachableRule } from './unreachable';

export type {
  FindingFix,
  FindingKind,
  FindingRule,
  FindingSeverity,
  IFacts,
  IFinding,
  PerDevice
} from './types';
export { userModels } from './user-models';

/** The finding rules, one per kind. */
export const FINDING_RULES: ReadonlyArray<FindingRule> = [
  staleModelRule,
  unreachableRule,
  heldOutsideRule,
  holderUnknownRule,
  namedOlderModelRule,
  modelCopyRule,
  graphHolderRule,
  tracebackTensorsRule,
  keptErrorRule,
  optimizerRule,
  outputTensorsRule,
  ownerObjectRule,
  cudaTensorsRule,
  cudaContextRule,
  fragmentedCacheRule,
  childProcessesRule
];

/**
 * Every finding of the facts, largest first (bytes on all devices), then
 * warnings before infos, then by id (a stable order).
 *
 * @param rules - the rules to run (default {@link FINDING_RULES}).
 */
export function findings(
  facts: IFacts,
  rules: ReadonlyArray<FindingRule> = FINDING_RULES
): IFinding[] {
  const rank = { warning: 0, info: 1 };
  return rules
    .flatMap(rule => rule(facts))
    .map(finding => withOrigins(finding, facts))
    .sort(
      (a, b) =>
        sumBytes(b.bytes) - sumBytes(a.bytes) ||
        rank[a.severity] - rank[b.severity] ||
        a.id.localeCompare(b.id)
    );
}

/** The user variable (or output-cache entry) a finding is about, as its fix or subject names it. */
function holderName(finding: IFinding): string {
  const fix = finding.fix;
  switch (fix.kind) {
    case 'delete-variable':
    case 'tensors':
    case 'detach':
    case 'drop-trainer':
      return fix.name;
    default:
      return finding.subject;
  }
}

/**
 * The finding with `origins` where the inventory's provenance says where the
 * memory of the root it is about was allocated (the root of its variable or
 * output-cache entry); unchanged otherwise.
 */
function withOrigins(finding: IFinding, facts: IFacts): IFinding {
  const inventory = facts.inventory;
  if (!inventory?.provenance?.groups?.length) {
    return finding;
  }
  const name = holderName(finding);
  const root = inventory.roots.find(
    r => (r.kind === 'variable' || r.kind === 'output') && r.name === name
  );
  const origins = root ? originsOfRoot(inventory, root) : [];
  return origins.length ? { ...finding, origins } : finding;
}

/** The findings of a list worth showing, and those below the floor. */
export interface IFindingsAtFloor {
  /** Findings at or above the floor, or holding no bytes at all (in order). */
  shown: IFinding[];
  /** Findings holding more than 0 and less than the floor (in order). */
  small: IFinding[];
}

/**
 * Split findings at a floor (the `findingFloorMiB` setting): a finding that
 * holds some bytes, fewer than `floorMiB` MiB on all its devices together
 * (a 4 B loss, a 20 B parameter), is `small`; one that holds none (a
 * process, a context) or at least the floor is `shown`.
 *
 * @param floorMiB - MiB; 0 or less: every finding is shown.
 */
export function splitAtFloor(
  list: ReadonlyArray<IFinding>,
  floorMiB: number
): IFindingsAtFloor {
  const floor = Math.max(0, floorMiB) * 2 ** 20;
  const shown: IFinding[] = [];
  const small: IFinding[] = [];
  for (const finding of list) {
    const bytes = sumBytes(finding.bytes);
    (bytes > 0 && bytes < floor ? small : shown).push(finding);
  }
  return { shown, small };
}

/** The facts of a kernel model: its latest inventory and sample, and its hello. */
export function factsOf(model: GpuKernelModel): IFacts {
  return {
    inventory: model.inventory,
    sample: model.latestSample,
    hello: model.hello
  };
}

/** Counts for a one-line summary (the gauge tooltip). */
export interface IFindingSummary {
  /** Number of warnings. */
  warnings: number;
  /** Bytes of the warnings, all devices. */
  warningBytes: number;
  /** Number of infos. */
  infos: number;
}

/** Count the warnings (and their bytes) and the infos. */
export function summarizeFindings(
  list: ReadonlyArray<IFinding>
): IFindingSummary {
  const warnings = list.filter(f => f.severity === 'warning');
  return {
    warnings: warnings.length,
    warningBytes: warnings.reduce((sum, f) => sum + sumBytes(f.bytes), 0),
    infos: list.length - warnings.length
  };
}

/** A command with its arguments: what a fix button runs. */
export interface IFixCommand {
  /** A {@link CommandIDs} id. */
  id: string;
  /** Its arguments (always with `kernelId`). */
  args: { [key: string]: string | string[] };
}

/**
 * The command a fix runs, or null for `none` (no button).
 *
 * - `clean` → Clean GPU, or the per-model "free" with `plan.modelId`;
 * - `delete` → "Delete…" of the model with the variables to delete (it asks);
 * - `delete-variable` → "Delete…" of one variable (it asks);
 * - `detach` → "Fix…" of the graph holder (it asks);
 * - `tensors` → "Move to CPU…" of the variable (it asks, and offers Delete);
 * - `drop-trainer` → "Drop the finished trainer, keep the model" (it asks);
 * - `restart` → Restart kernel (JupyterLab's confirmation);
 * - `drop-workers` → "Drop…" of the DataLoader workers (it asks).
 */
export function fixCommand(
  fix: FindingFix,
  kernelId: string
): IFixCommand | null {
  switch (fix.kind) {
    case 'clean':
      return fix.plan.modelId
        ? {
            id: CommandIDs.freeModel,
            args: { kernelId, modelId: fix.plan.modelId }
          }
        : { id: CommandIDs.clean, args: { kernelId } };
    case 'delete':
      return {
        id: CommandIDs.deleteModel,
        args: { kernelId, modelId: fix.modelId, names: [...fix.names] }
      };
    case 'delete-variable':
      return {
        id: CommandIDs.deleteVariable,
        args: fix.with?.length
          ? { kernelId, name: fix.name, with: [...fix.with] }
          : { kernelId, name: fix.name }
      };
    case 'detach':
      return {
        id: CommandIDs.fixGraphHolder,
        args: { kernelId, name: fix.name }
      };
    case 'tensors':
      return {
        id: CommandIDs.moveTensorsToCpu,
        args: { kernelId, name: fix.name }
      };
    case 'drop-trainer':
      return {
        id: CommandIDs.dropTrainer,
        args: { kernelId, modelId: fix.modelId, name: fix.name }
      };
    case 'restart':
      return { id: CommandIDs.restartKernel, args: { kernelId } };
    case 'drop-workers':
      return {
        id: CommandIDs.dropWorkers,
        args: { kernelId, names: [...fix.names] }
      };
    case 'none':
      return null;
  }
}

/**
 * The label of a fix's button, or null for `none` (no button): "Clean GPU"
 * (also for one model: the Clean GPU plan limited to it), "Delete m…",
 * "Fix…", "Move to CPU…", "Drop the finished trainer, keep the model",
 * "Restart kernel", "Drop train_loader…". The caption comes from the command.
 */
export function fixLabel(
  fix: FindingFix,
  trans: TranslationBundle
): string | null {
  switch (fix.kind) {
    case 'clean':
      return trans.__('Clean GPU');
    case 'delete':
      return trans.__('Delete %1…', fix.names.join(', '));
    case 'delete-variable':
      return trans.__('Delete %1…', [fix.name, ...(fix.with ?? [])].join(', '));
    case 'detach':
      return trans.__('Fix…');
    case 'tensors':
      return trans.__('Move to CPU…');
    case 'drop-trainer':
      return trans.__('Drop the finished trainer, keep the model');
    case 'restart':
      return trans.__('Restart kernel');
    case 'drop-workers':
      return trans.__('Drop %1…', fix.names.join(', '));
    case 'none':
      return null;
  }
}
