/**
 * Stale model: a model no user variable names, kept alive only by the
 * output cache (`Out[2]`, `_2`, `_`) or the last traceback. Warning; the fix
 * is the Clean GPU plan for that model (the panel's "free": it drops only
 * what holds it). Bytes: the model and its parts, per device.
 */
import {
  findStackedModels,
  holderPaths,
  stackingKey
} from '../memory/stacking';
import { formatBytes, listNames, sumBytes } from '../format';
import { modelAndParts, modelName, userModels } from './user-models';
import type { FindingRule, IFinding } from './types';
import { faultSeverity } from './severity';

/** The stale-model rule. */
export const staleModelRule: FindingRule = facts => {
  const { inventory } = facts;
  const stacked = new Set(
    (inventory ? findStackedModels(inventory) : []).flatMap(g =>
      g.older.map(m => m.id)
    )
  );
  return userModels(inventory)
    .filter(
      m =>
        m.stale &&
        m.holders.some(h => h.kind === 'output' || h.kind === 'traceback')
    )
    .map((model): IFinding => {
      const bytes = modelAndParts(model);
      const evidence = holderPaths({
        ...model,
        holders: model.holders.filter(h => h.kind !== 'hidden')
      });
      const name = modelName(model);
      return {
        kind: 'stale-model',
        id: `stale-model:${model.id}`,
        severity: faultSeverity(bytes, facts),
        subject: name,
        bytes,
        explain: trans =>
          trans.__(
            'No variable names %1 (%2) any more; only %3 keeps it alive. Clean GPU frees it.',
            name,
            formatBytes(sumBytes(bytes)),
            listNames(evidence, 3, trans)
          ),
        evidence,
        fix: { kind: 'clean', plan: { modelId: model.id } },
        ...(stacked.has(model.id) ? { stack: stackingKey(model) } : {})
      };
    });
};
