/**
 * Output tensors: tensors (no model) that the output cache keeps — a
 * displayed `torch.ones(...)`, a list of tensors shown as a cell's value.
 *
 * One finding per cell, from the output roots' `cells` (the execution counts
 * whose `Out` entry is the very object a root names): `Out[7]`, `_7` and
 * `_` naming the output of cell [7] are one finding "the displayed output of
 * cell [7]", its evidence those names. Bytes: what dropping that cell's cache
 * entries returns — the roots' `sole` (the agent counts the names of one
 * object as one holder), so a tensor a variable also names is shared, never
 * offered (no finding when nothing is sole). Hidden copies that no `Out`
 * entry names any more (`cells` empty: `_7` or `__` left behind by
 * `del Out[7]` or `%reset -f out`) are one finding each, "a hidden copy in
 * the output cache (`__`)". Warning when CUDA memory is held, else info.
 * Fix: Clean GPU (its plan drops those cache entries, `planClean`) — only
 * when they hold CUDA memory: the plan leaves entries that hold RAM alone,
 * so such a finding says so and offers no fix.
 *
 * Without `cells`/`sole` (an older agent) the cell is read from the name
 * (`Out[N]`, `_N`), the slots `_`, `__`, `___` are "a recent cell", and the
 * bytes are the first-come `bytes`.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IRootBytes } from '../../protocol';
import { formatBytes, sumBytes } from '../format';
import { GRAPH_FIX_MIN_BYTES, isOutputGraph } from '../memory/graph-holders';
import { maxCudaBytes } from './user-models';
import type { FindingRule, IFinding, PerDevice } from './types';
import { faultSeverity } from './severity';

const CELL = /^(?:Out\[(\d{1,9})\]|_(\d{1,9}))$/;
const SLOTS = new Set(['_', '__', '___']);

/** The execution count an output root names (`Out[4]`, `_4` → 4), or null (`_`, `__`, `___`). */
export function outputCell(name: string): number | null {
  const match = CELL.exec(name);
  return match ? Number(match[1] ?? match[2]) : null;
}

/** Per device, the largest of the figures (the roots of one object keep the same storages). */
function maxPerDevice(list: ReadonlyArray<PerDevice>): PerDevice {
  const out: PerDevice = {};
  for (const bytes of list) {
    for (const [device, value] of Object.entries(bytes)) {
      out[device] = Math.max(out[device] ?? 0, value);
    }
  }
  return out;
}

/** One group of output roots: the cache entries of one cell (or one hidden copy). */
interface IGroup {
  /** Execution counts, ascending; empty for a hidden copy. */
  cells: number[];
  /** The roots (their names are the evidence). */
  roots: IRootBytes[];
}

/** The groups of the output roots that hold tensors and no model. */
function groups(roots: ReadonlyArray<IRootBytes>): IGroup[] {
  const byKey = new Map<string, IGroup>();
  const add = (key: string, cells: number[], root: IRootBytes) => {
    const group = byKey.get(key) ?? { cells, roots: [] };
    group.roots.push(root);
    byKey.set(key, group);
  };
  for (const root of roots) {
    if (root.cells !== undefined) {
      const cells = [...new Set(root.cells)].sort((a, b) => a - b);
      if (cells.length) {
        add(cells.join(','), cells, root);
      } else {
        add(`copy:${root.name}`, [], root);
      }
      continue;
    }
    const cell = outputCell(root.name);
    if (cell !== null) {
      add(String(cell), [cell], root);
    } else if (SLOTS.has(root.name)) {
      add('_', [], root);
    }
  }
  return [...byKey.values()].sort(
    (a, b) =>
      (a.cells[0] ?? Infinity) - (b.cells[0] ?? Infinity) ||
      a.roots[0].name.localeCompare(b.roots[0].name)
  );
}

/** What a group's finding tells, from its roots. */
interface IOutputFacts {
  /** The cells, `[7], [9]`; empty for a hidden copy. */
  cells: number[];
  /** The roots' names, `Out[7], _7`. */
  subject: string;
  /** Tensors first attributed here (0: another name counted them first). */
  tensors: number;
  /** An older agent's `_`, `__`, `___` (no `cells`): "a recent cell". */
  legacySlots: boolean;
  /** Some of it is CUDA memory. */
  onGpu: boolean;
  /** What dropping the entries frees, and what they share with `sharedWith`, bytes per device. */
  bytes: PerDevice;
  shared: PerDevice;
  sharedWith: string[];
}

/** The explanation of an output group's finding. */
function explainOutput(f: IOutputFacts): (trans: TranslationBundle) => string {
  return trans => {
    const cells = f.cells.map(c => `[${c}]`).join(', ');
    const what = f.cells.length
      ? trans._n(
          'The displayed output of cell %2 (%3)',
          'The displayed output of cells %2 (%3)',
          f.cells.length,
          cells,
          f.subject
        )
      : f.legacySlots
        ? trans.__('The displayed output of a recent cell (%1)', f.subject)
        : trans.__('A hidden copy in the output cache (%1)', f.subject);
    // `tensors` counts what was first attributed here; a copy whose
    // tensors another name counted first says no number
    const size = formatBytes(sumBytes(f.bytes));
    const text = !f.onGpu
      ? trans.__(
          '%1 keeps tensors alive in RAM, %2, that no variable names. Clean GPU leaves output-cache entries that hold no VRAM.',
          what,
          size
        )
      : f.tensors
        ? trans._n(
            '%2 keeps %1 tensor alive, %3, that no variable names. Clean GPU drops it from the output cache.',
            '%2 keeps %1 tensors alive, %3, that no variable names. Clean GPU drops them from the output cache.',
            f.tensors,
            what,
            size
          )
        : trans.__(
            '%1 keeps tensors alive, %2, that no variable names. Clean GPU drops them from the output cache.',
            what,
            size
          );
    return sumBytes(f.shared) > 0
      ? `${text} ${trans.__(
          '%1 more is shared with %2 and stays.',
          formatBytes(sumBytes(f.shared)),
          f.sharedWith.join(', ') || trans.__('another holder')
        )}`
      : text;
  };
}

/** The finding of one group; null when a variable (or another cell) keeps it all: nothing to free here. */
function outputFinding(group: IGroup): IFinding | null {
  const facts = group.roots[0].sole !== undefined;
  const bytes = facts
    ? maxPerDevice(group.roots.map(r => r.sole ?? {}))
    : maxPerDevice(group.roots.map(r => r.bytes));
  if (sumBytes(bytes) <= 0) {
    return null;
  }
  const names = group.roots.map(r => r.name);
  const f: IOutputFacts = {
    cells: group.cells,
    subject: names.join(', '),
    tensors: Math.max(...group.roots.map(r => r.tensors)),
    legacySlots: !facts && !group.cells.length,
    onGpu: maxCudaBytes(bytes) > 0,
    bytes,
    shared: maxPerDevice(group.roots.map(r => r.shared ?? {})),
    sharedWith: [...new Set(group.roots.flatMap(r => r.sharedWith ?? []))]
  };
  return {
    kind: 'output-tensors',
    id: group.cells.length
      ? `output-tensors:${group.cells.join(',')}`
      : f.legacySlots
        ? 'output-tensors:_'
        : `output-tensors:copy:${names[0]}`,
    severity: 'info', // weighed by the rule (faultSeverity)
    subject: f.subject,
    bytes,
    ...(sumBytes(f.shared) > 0
      ? { sharedBytes: f.shared, sharedWith: f.sharedWith }
      : {}),
    explain: explainOutput(f),
    evidence: names,
    fix: f.onGpu ? { kind: 'clean', plan: {} } : { kind: 'none' }
  };
}

/**
 * The output-tensors rule. A cell's output whose tensors keep autograd
 * graphs of at least `GRAPH_FIX_MIN_BYTES` (an output-cache graph holder,
 * agent 0.12.0) is the graph-holder rule's finding, with its own fix
 * (detach): not told twice.
 */
export const outputTensorsRule: FindingRule = facts => {
  const { inventory } = facts;
  const roots = (inventory?.roots ?? []).filter(
    r => r.kind === 'output' && r.models === 0
  );
  const graphNames = new Set(
    (inventory?.graphs ?? [])
      .filter(g => isOutputGraph(g) && sumBytes(g.bytes) >= GRAPH_FIX_MIN_BYTES)
      .flatMap(g => g.names ?? [g.name])
  );
  return groups(roots).flatMap(group => {
    if (group.roots.some(r => graphNames.has(r.name))) {
      return [];
    }
    const finding = outputFinding(group);
    return finding
      ? [{ ...finding, severity: faultSeverity(finding.bytes, facts) }]
      : [];
  });
};
