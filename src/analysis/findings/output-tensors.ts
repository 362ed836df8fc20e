/**
 * Output tensors: tensors (no model) that only the output cache keeps — a
 * displayed `torch.ones(...)`, a list of tensors shown as a cell's value.
 * One finding per cell ("the displayed output of cell [N]"; subject: the
 * root names), from the roots
 * `Out[N]` and `_N` that hold bytes and no model. The slots `_`, `__`,
 * `___` do not say which cell they are: what they hold is one finding
 * "the displayed output of a recent cell", the slots as its evidence. Warning
 * when CUDA memory is held, else info. Fix: Clean GPU (its plan drops the
 * output-cache entries whose roots hold CUDA bytes, `planClean`).
 */
import type { IRootBytes } from '../../protocol';
import { formatBytes, sumBytes } from '../format';
import { addBytes, maxCudaBytes } from './models';
import type { FindingRule, IFinding } from './types';

const CELL = /^(?:Out\[(\d{1,9})\]|_(\d{1,9}))$/;
const SLOTS = new Set(['_', '__', '___']);

/** The execution count an output root names (`Out[4]`, `_4` → 4), or null (`_`, `__`, `___`). */
export function outputCell(name: string): number | null {
  const match = CELL.exec(name);
  return match ? Number(match[1] ?? match[2]) : null;
}

/** The output-tensors rule. */
export const outputTensorsRule: FindingRule = ({ inventory }) => {
  const roots = (inventory?.roots ?? []).filter(
    r => r.kind === 'output' && r.models === 0 && sumBytes(r.bytes) > 0
  );
  const cells = new Map<number, IRootBytes[]>();
  const slots: IRootBytes[] = [];
  for (const root of roots) {
    const cell = outputCell(root.name);
    if (cell !== null) {
      cells.set(cell, [...(cells.get(cell) ?? []), root]);
    } else if (SLOTS.has(root.name)) {
      slots.push(root);
    }
  }
  const finding = (
    id: string,
    cell: number | null,
    group: IRootBytes[]
  ): IFinding => {
    const subject = group.map(r => r.name).join(', ');
    const bytes: Record<string, number> = {};
    group.forEach(r => addBytes(bytes, r.bytes));
    const tensors = group.reduce((n, r) => n + r.tensors, 0);
    return {
      kind: 'output-tensors',
      id,
      severity: maxCudaBytes(bytes) > 0 ? 'warning' : 'info',
      subject,
      bytes,
      explain: trans => {
        const what =
          cell === null
            ? trans.__('The displayed output of a recent cell (%1)', subject)
            : trans.__('The displayed output of cell [%1] (%2)', cell, subject);
        return trans._n(
          '%2 keeps %1 tensor alive (%3) that no variable names. Clean GPU drops it from the output cache.',
          '%2 keeps %1 tensors alive (%3) that no variable names. Clean GPU drops them from the output cache.',
          tensors,
          what,
          formatBytes(sumBytes(bytes))
        );
      },
      evidence: group.map(r => r.name),
      fix: { kind: 'clean', plan: {} }
    };
  };
  const found = [...cells]
    .sort(([a], [b]) => a - b)
    .map(([cell, group]) => finding(`output-tensors:${cell}`, cell, group));
  if (slots.length) {
    found.push(finding('output-tensors:_', null, slots));
  }
  return found;
};
