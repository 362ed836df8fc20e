/**
 * Stale model: a model no user variable names, kept alive only by the
 * output cache (`Out[2]`, `_2`, `_`) or the last traceback. Warning; the fix
 * is the Clean GPU plan for that model (the panel's "free": it drops only
 * what holds it), which the text promises frees it only where the plan
 * drops every holder (`cleanLeaves`). Where a holder is not IPython's own
 * (a user's own `_`, `Out['3']`, a module's global the agent found) Clean
 * GPU leaves it: the text says so and the fix is a restart. Bytes: the
 * model and its parts, per device.
 */
import {
  findStackedModels,
  holderPaths,
  stackingKey
} from '../memory/stacking';
import { cleanLeaves } from '../memory/holders';
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
      const size = formatBytes(sumBytes(bytes));
      const left = cleanLeaves(model, inventory);
      const common = {
        kind: 'stale-model' as const,
        id: `stale-model:${model.id}`,
        severity: faultSeverity(bytes, facts),
        subject: name,
        bytes,
        ...(stacked.has(model.id) ? { stack: stackingKey(model) } : {})
      };
      if (left.length) {
        return {
          ...common,
          explain: trans =>
            trans.__(
              "No variable names %1 (%2) any more; %3 keeps it alive. Clean GPU may not free it: it leaves %4 alone, which may be a reference of yours, not IPython's own output cache. Delete that reference, or restart the kernel.",
              name,
              size,
              listNames([...new Set([...evidence, ...left])], 3, trans),
              listNames(left, 3, trans)
            ),
          evidence: [...new Set([...evidence, ...left])],
          fix: { kind: 'restart', bytes }
        };
      }
      return {
        ...common,
        explain: trans =>
          trans.__(
            'No variable names %1 (%2) any more; only %3 keeps it alive. Clean GPU frees it.',
            name,
            size,
            listNames(evidence, 3, trans)
          ),
        evidence,
        fix: { kind: 'clean', plan: { modelId: model.id } }
      };
    });
};
