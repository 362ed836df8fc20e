/**
 * The finding: what the user is told about one thing that holds memory, as
 * a pure function of the agent's facts (see `docs/protocol.md`). Views (the
 * VRAM panel, the gauge tooltip, the toasts) render findings generically;
 * the rules (one file per kind in this folder) only decide.
 *
 * Texts: a rule never translates. Its one-line explanation is a builder,
 * `explain(trans)`, that the view calls with the extension's bundle; the
 * `trans.__('…')` literals stay in the rule's file, so the string extraction
 * of jupyterlab-translate finds them, and a rule's jest spec calls the
 * builder with `nullTranslator`'s bundle. (A message key with arguments
 * would have to repeat every literal in a catalogue the extractor cannot
 * see.)
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IHello, IInventory, ISample } from '../../protocol';
import type { IPlanOptions } from '../codegen/clean-plan-options';
import type { IRootOrigin } from '../memory/origins';

/**
 * Kind of fault. One rule per kind (`FINDING_RULES`):
 * - `stale-model`: a model no user variable names, kept by the output cache
 *   or the last traceback;
 * - `unreachable`: models (often submodules that outlived their parent)
 *   nothing reaches, waiting for `gc.collect()` (a reference cycle);
 * - `holder-unknown`: models whose holder was not found because the walk hit
 *   its bound (nothing is offered);
 * - `named-older-model`: an older model of one family still named by a user
 *   variable while a newer one is alive;
 * - `graph-holder`: a user variable keeping autograd graphs alive;
 * - `traceback-tensors`: tensors the last exception's traceback keeps;
 * - `output-tensors`: tensors (no model) in the output cache;
 * - `owner-object`: optimizer state and model copies hanging off a model;
 * - `cuda-tensors`: CUDA tensors in a user variable, outside any model;
 * - `cuda-context`: the CUDA context and libraries (freed only by restart);
 * - `fragmented-cache`: PyTorch's cache that `empty_cache()` cannot return
 *   while neighbouring tensors live (inactive split blocks);
 * - `child-processes`: the kernel's child processes (DataLoader workers)
 *   and the names that keep them;
 * - `kept-error`: a caught exception kept in a user variable, whose
 *   traceback's frames keep tensors;
 * - `optimizer`: an optimizer a user variable names: its state, and, when
 *   its model is gone, the parameters and gradients it keeps;
 * - `model-copy`: a deliberate copy of a model a user variable names
 *   (`copy.deepcopy`, a whole-model `torch.load`), on a CUDA device.
 */
export type FindingKind =
  | 'stale-model'
  | 'unreachable'
  | 'holder-unknown'
  | 'named-older-model'
  | 'graph-holder'
  | 'traceback-tensors'
  | 'output-tensors'
  | 'owner-object'
  | 'cuda-tensors'
  | 'cuda-context'
  | 'fragmented-cache'
  | 'child-processes'
  | 'kept-error'
  | 'optimizer'
  | 'model-copy'
  | 'held-outside';

/** `warning`: memory the user loses without knowing; `info`: worth knowing. */
export type FindingSeverity = 'info' | 'warning';

/** Bytes per device name (`"cpu"`, `"cuda:0"`, ...), as in the protocol. */
export type PerDevice = Record<string, number>;

/**
 * How a finding is fixed. Each kind maps to one command (`fixCommand` in
 * `./index.ts`):
 * - `clean`: the Clean GPU plan (stale holders only): `plan` empty runs
 *   Clean GPU (`CommandIDs.clean`), `plan.modelId` the per-model "free"
 *   (`CommandIDs.freeModel`);
 * - `delete`: ask, then `del names` and free the model
 *   (`CommandIDs.deleteModel`); names are Python identifiers only;
 * - `detach`: ask, then detach the tensors of a graph holder
 *   (`CommandIDs.fixGraphHolder`);
 * - `delete-variable`: ask, then `del name` of one user variable and
 *   collect (`CommandIDs.deleteVariable`): it frees what only that variable
 *   reaches (its root's `sole`), e.g. a trainer's optimizer state while the
 *   model stays; `name` is a Python identifier; `with`: other variables
 *   deleted in the same cell, which keep the first one (an optimizer's
 *   LR scheduler);
 * - `tensors`: ask, then move the CUDA tensors of a user variable to the CPU
 *   or delete the variable (`CommandIDs.moveTensorsToCpu`, whose dialog
 *   also offers Delete); `name` is a Python identifier;
 * - `drop-trainer`: ask, then drop the finished Ultralytics trainer of the
 *   YOLO that the user variable `name` names, keeping the model
 *   (`CommandIDs.dropTrainer`); `name` is a Python identifier;
 * - `restart`: restart the kernel, with JupyterLab's confirmation
 *   (`CommandIDs.restartKernel`); `bytes` is what it returns that nothing
 *   else can (the CUDA context and libraries), per device;
 * - `drop-workers`: ask, then shut down the DataLoader workers and delete
 *   the variables `names` that keep them (`CommandIDs.dropWorkers`); `pids`
 *   are the workers, for the dialog and the check afterwards;
 * - `none`: no command can fix it from here: no button.
 */
export type FindingFix =
  | { kind: 'clean'; plan: Pick<IPlanOptions, 'modelId'> }
  | { kind: 'delete'; modelId: string; names: string[] }
  | { kind: 'delete-variable'; name: string; with?: string[] }
  | { kind: 'detach'; name: string }
  | { kind: 'tensors'; name: string }
  | { kind: 'drop-trainer'; modelId: string; name: string }
  | { kind: 'restart'; bytes: PerDevice }
  | { kind: 'drop-workers'; names: string[]; pids: number[] }
  | { kind: 'none' };

/** One finding. */
export interface IFinding {
  /** The fault kind (which rule made it). */
  kind: FindingKind;
  /**
   * Stable within a kernel while the same thing is found: the kind and the
   * objects (model ids, variable names), e.g. `stale-model:0x7f01`.
   */
  id: string;
  /** Info or warning; only warnings raise a toast. */
  severity: FindingSeverity;
  /** What it is about, as names from the kernel (not translated): `m`, `Out[4]`, `YOLO (yolov8n.yaml)`. */
  subject: string;
  /**
   * Bytes per device that the fix returns (or that freeing the subject
   * would return), every storage counted once, as the agent measured them.
   */
  bytes: PerDevice;
  /**
   * Bytes per device of `bytes` that the facts say are shared with
   * something that stays; absent until the agent reports sharing.
   */
  sharedBytes?: PerDevice;
  /** Who else keeps `sharedBytes` (root names from the kernel), when known. */
  sharedWith?: string[];
  /** The one-line explanation, built with the view's translations. */
  explain: (trans: TranslationBundle) => string;
  /**
   * A shorter explanation for a toast (at most 140 characters), where
   * `explain` is longer; the toast uses `explain` without it.
   */
  short?: (trans: TranslationBundle) => string;
  /** Holder paths and other evidence (`Out[2]`, `model.trainer.optimizer`), as the kernel names them. */
  evidence: string[];
  /**
   * Where its memory was allocated (issue 24, with the `recordOrigins`
   * setting on): the origins of the variable or output-cache entry it is
   * about, largest first; absent when the agent reports none. Set by
   * `findings()` after the rules, from the inventory's `provenance`.
   */
  origins?: IRootOrigin[];
  /** How to fix it. */
  fix: FindingFix;
  /**
   * The stacking key when the finding is about an older instance of a stack
   * (`ultralytics`): the stacked-model toast tells those, not the generic one.
   */
  stack?: string;
}

/** What the rules read: the agent's latest facts for one kernel. */
export interface IFacts {
  /** The latest inventory, or null before one arrived. */
  inventory: IInventory | null;
  /** The latest sample, or null. */
  sample: ISample | null;
  /** The agent's hello, or null. */
  hello: IHello | null;
}

/** A rule: the findings of one kind, from the facts. Pure. */
export type FindingRule = (facts: IFacts) => IFinding[];
