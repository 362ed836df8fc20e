/**
 * Holder unknown: models the agent's walk did not reach because it hit its
 * bound (the inventory is `truncated`). A variable may still hold them, so
 * they are neither stale nor unreachable and nothing is offered. Info.
 */
import { formatBytes, sumBytes } from '../format';
import { addBytes, isHiddenOnly, modelAndParts } from './user-models';
import type { FindingRule } from './types';
import { classCounts } from './unreachable';

/** The holder-unknown rule: one finding for the models whose holder was not found. */
export const holderUnknownRule: FindingRule = ({ inventory }) => {
  const models = (inventory?.models ?? []).filter(
    m => isHiddenOnly(m) && !m.stale
  );
  if (!models.length) {
    return [];
  }
  const bytes: Record<string, number> = {};
  models.forEach(m => addBytes(bytes, modelAndParts(m)));
  const classes = classCounts(models.map(m => m.className));
  return [
    {
      kind: 'holder-unknown',
      id: 'holder-unknown',
      severity: 'info',
      subject: classes,
      bytes,
      explain: trans =>
        trans.__(
          '%1, %2: holder not found, the walk bound was hit. A variable may still use it, so nothing is offered.',
          classes,
          formatBytes(sumBytes(bytes))
        ),
      evidence: [...new Set(models.flatMap(m => m.holders.map(h => h.name)))],
      fix: { kind: 'none' }
    }
  ];
};
