/**
 * Live CUDA memory by origin (issue 24): what the panel's section "Live CUDA
 * memory by origin" and the findings say of the agent's `provenance` fact,
 * as pure functions of an inventory. Every figure is the agent's measurement:
 * block bytes from PyTorch's allocator snapshot, grouped by the notebook cell
 * and line whose code allocated them.
 */
import type {
  IInventory,
  IProvenance,
  IProvenanceGroup,
  IRootBytes
} from '../../protocol';

/** One row of the section: an origin on the device shown. */
export interface IOriginRow {
  /** Stable key within an inventory: the group's index in `provenance.groups`. */
  key: string;
  /** Execution count of the cell whose code allocated the blocks, or null (not a cell). */
  cell: number | null;
  /** That notebook cell's id, when the kernel knew it (the link's first choice). */
  cellId: string | null;
  /**
   * Other execution counts that ran the very same cell text: the kernel
   * keeps one file per text, so the blocks may come from any of them.
   */
  sameCode: number[];
  /** 1-based line in that cell (or file), or null. */
  line: number | null;
  /** The source line, stripped, when known. */
  text: string | null;
  /** The function that allocated (`<module>`: the cell's top level). */
  name: string;
  /** The cell that ran that code, when another (a `def` of an earlier cell called later). */
  via: { cell: number; line: number | null } | null;
  /** A file outside the notebook (kind "other"): its path. */
  file: string | null;
  /** Bytes of the live blocks (the allocator's block sizes). */
  bytes: number;
  /** Live blocks. */
  blocks: number;
}

/** The section's state: why there are no rows, or the rows and what the figures cover. */
export type OriginsView =
  | { state: 'off' }
  | { state: 'waiting'; reason: 'torch' | 'cuda' | null }
  | { state: 'unsupported'; error: string | null }
  | {
      state: 'recording';
      /** First cell run while recording; earlier blocks are untraced. */
      since: number | null;
      rows: IOriginRow[];
      /** Every live block's bytes on this device. */
      liveBytes: number;
      /** Bytes of blocks with no recorded stack (before `since`, or no Python stack). */
      untracedBytes: number;
      /** Blocks whose stack was not read (the agent's bound), and their bytes. */
      skipped: number;
      skippedBytes: number;
      /** Origins left out of the message (the agent's bound). */
      truncated: number;
      /** What reading the snapshot cost the kernel after the last cell, ms. */
      costMs: number | null;
      /** The user's code started the recording (the agent only reads it). */
      byUser: boolean;
      /**
       * The user's code turned recording off: null while torch records, else
       * the last cell run when that was seen (`{ cell: null }` if unknown).
       */
      stopped: { cell: number | null } | null;
      /** What torch raised reading the snapshot this time, if it did. */
      error: string | null;
    };

function rowOf(group: IProvenanceGroup, index: number): IOriginRow {
  return {
    key: String(index),
    cell: group.kind === 'cell' ? group.cell : null,
    cellId: group.cellId ?? null,
    sameCode: group.sameCode ?? [],
    line: group.line,
    text: group.text,
    name: group.name,
    via: group.via,
    file: group.kind === 'other' ? group.file : null,
    bytes: group.bytes,
    blocks: group.blocks
  };
}

/**
 * The section's view of an inventory for device `device` (cuda:N's N):
 * `off` without a `provenance` fact (the setting is off, or an older agent).
 * The figures cover every device; the rows are those of `device`.
 */
export function originsView(
  inventory: IInventory | null,
  device: number
): OriginsView {
  const fact: IProvenance | undefined = inventory?.provenance;
  if (!fact) {
    return { state: 'off' };
  }
  if (!fact.recording) {
    return fact.reason === 'unsupported'
      ? { state: 'unsupported', error: fact.error ?? null }
      : { state: 'waiting', reason: fact.reason };
  }
  const groups = fact.groups ?? [];
  return {
    state: 'recording',
    since: fact.since,
    rows: groups
      .map((group, index) => ({ group, index }))
      .filter(({ group }) => group.device === device)
      .map(({ group, index }) => rowOf(group, index)),
    liveBytes: fact.liveBytes ?? 0,
    untracedBytes: fact.untracedBytes ?? 0,
    skipped: fact.skipped ?? 0,
    skippedBytes: fact.skippedBytes ?? 0,
    truncated: fact.truncated ?? 0,
    costMs: fact.costMs ?? null,
    byUser: fact.byUser ?? false,
    stopped: fact.stopped ? { cell: fact.stoppedIn ?? null } : null,
    error: fact.error ?? null
  };
}

/** One origin of what a root keeps. */
export interface IRootOrigin extends IOriginRow {
  /** Bytes of the root that came from this origin. */
  held: number;
  /** Of `held`, the bytes another root keeps too (0: none, or an agent before 0.15.0). */
  shared: number;
}

/**
 * Where the bytes a root keeps were allocated (its `origins`, largest
 * first), or [] without a provenance fact or origins.
 */
export function originsOfRoot(
  inventory: IInventory | null,
  root: IRootBytes
): IRootOrigin[] {
  const groups = inventory?.provenance?.groups;
  if (!groups || !root.origins) {
    return [];
  }
  return root.origins.flatMap(origin => {
    const group = groups[origin.group];
    return group
      ? [
          {
            ...rowOf(group, origin.group),
            held: origin.bytes,
            shared: origin.shared ?? 0
          }
        ]
      : [];
  });
}

/**
 * Where the bytes of the user variable `name` were allocated: the origins of
 * its root (a `variable` root of that name), or [] when unknown.
 */
export function originsOfVariable(
  inventory: IInventory | null,
  name: string
): IRootOrigin[] {
  const root = inventory?.roots.find(
    r => r.kind === 'variable' && r.name === name
  );
  return root ? originsOfRoot(inventory, root) : [];
}

/** What recording allocation stacks costs, as a benchmark measured it (shown beside the toggle). */
export interface IRecordingCost {
  /** Extra microseconds per CUDA allocation (and its free). */
  allocUs: number;
  /** A training step's time with recording on, over off. */
  stepRatio: number;
  /** Where it was measured (the device and the benchmark), not translated. */
  where: string;
}

/**
 * The measured cost of recording (bench/provenance_gpu.py on the device
 * machine; docs/benchmarks.md, "Provenance"), or undefined where not measured.
 */
export const RECORDING_COST: IRecordingCost | undefined = undefined;
