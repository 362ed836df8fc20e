/**
 * Traceback tensors: what the last exception's traceback keeps alive (the
 * failed cell's frames and their tensors). Bytes: the traceback root's, per
 * device (storages no variable or output reaches), without the stale models
 * it holds (those are `stale-model` findings of their own). Evidence: the
 * frames that keep bytes. Warning when it holds CUDA memory, else info. Fix:
 * Clean GPU (it clears the last traceback).
 */
import { formatBytes, formatPlacement, sumBytes } from '../format';
import { addBytes, modelAndParts, userModels } from './user-models';
import type { FindingRule } from './types';
import { faultSeverity } from './severity';

/** The traceback-tensors rule: at most one finding. */
export const tracebackTensorsRule: FindingRule = facts => {
  const { inventory } = facts;
  if (!inventory) {
    return [];
  }
  const roots = inventory.roots.filter(r => r.kind === 'traceback');
  const bytes: Record<string, number> = {};
  roots.forEach(r => addBytes(bytes, r.bytes));
  // The roots' bytes are attributed in the order variables, output cache,
  // traceback: a stale model the output cache does not hold counts here.
  for (const model of userModels(inventory)) {
    const kinds = new Set(model.holders.map(h => h.kind));
    if (model.stale && kinds.has('traceback') && !kinds.has('output')) {
      for (const [device, value] of Object.entries(modelAndParts(model))) {
        if (device in bytes) {
          bytes[device] = Math.max(0, bytes[device] - value);
        }
      }
    }
  }
  for (const device of Object.keys(bytes)) {
    if (bytes[device] <= 0) {
      delete bytes[device];
    }
  }
  if (sumBytes(bytes) === 0) {
    return [];
  }
  const error = inventory.lastError;
  const subject = frameChain(roots.map(r => r.name));

  const evidence = (error?.frames ?? [])
    .filter(f => sumBytes(f.bytes) > 0)
    .map(f => `${f.name}: ${formatPlacement(f.bytes)} (${f.tensors})`);
  return [
    {
      kind: 'traceback-tensors',
      id: 'traceback-tensors',
      severity: faultSeverity(bytes, facts),
      subject,
      bytes,
      explain: trans =>
        error
          ? trans.__(
              'The last exception (%1) keeps its frames and their tensors alive: %2. Clean GPU clears the last traceback.',
              error.type,
              formatBytes(sumBytes(bytes))
            )
          : trans.__(
              'The last exception keeps its frames and their tensors alive: %1. Clean GPU clears the last traceback.',
              formatBytes(sumBytes(bytes))
            ),
      evidence: evidence.length ? evidence : roots.map(r => r.name),
      fix: { kind: 'clean', plan: {} }
    }
  ];
};

/** The agent's name of a traceback root: `last traceback (<frame>)`. */
const TRACEBACK_ROOT = /^last traceback \((.*)\)$/;

/**
 * The subject of the finding: the traceback's frames named once, in order,
 * `last traceback (<module> → train → step)`, instead of "last traceback"
 * before each of them (a deep call chain named it six times). Root names not
 * of the agent's form are listed as they are.
 */
export function frameChain(names: ReadonlyArray<string>): string {
  const frames = names.map(name => TRACEBACK_ROOT.exec(name)?.[1] ?? null);
  if (!frames.length || frames.some(f => f === null)) {
    return names.join(', ');
  }
  return `last traceback (${frames.join(' → ')})`;
}
