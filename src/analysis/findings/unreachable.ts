/**
 * Unreachable: models nothing reaches — typically the layers of a model
 * that `del` dropped (a YOLO's `Conv`, `C2f`, `Detect`) still sitting in a
 * reference cycle. They are not models the user has: ONE finding for all of
 * them, "waiting for garbage collection"; Clean GPU runs `gc.collect()` and
 * frees them. Warning when they hold CUDA memory, else info.
 *
 * Not when the walk hit its bound: nothing reaching a model then proves
 * nothing (see `holder-unknown`); not for a model the agent found held
 * outside the namespace or that survived a full collection (`outside`,
 * agent 0.12.0: `held-outside`), which `gc.collect()` does not free.
 */
import { formatBytes, sumBytes } from '../format';
import { addBytes, isHiddenOnly, modelAndParts } from './user-models';
import type { FindingRule } from './types';
import { faultSeverity } from './severity';

/**
 * Class names with a count, most first: `Conv ×8, C2f ×3, Detect`; beyond
 * `max` classes, `+n` for the rest (`Conv ×8, C2f ×3 +1`).
 */
export function classCounts(
  classNames: ReadonlyArray<string>,
  max = Infinity
): string {
  const counts = new Map<string, number>();
  for (const name of classNames) {
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return [...counts]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([name, n]) => (n > 1 ? `${name} ×${n}` : name))
    .reduce(
      (text, item, i, all) =>
        i < max
          ? text
            ? `${text}, ${item}`
            : item
          : i === max
            ? `${text} +${all.length - max}`
            : text,
      ''
    );
}

/** The unreachable rule: one finding for every module nothing reaches. */
export const unreachableRule: FindingRule = facts => {
  const { inventory } = facts;
  const models = (inventory?.models ?? []).filter(
    m => isHiddenOnly(m) && m.stale && !m.outside
  );
  if (!models.length) {
    return [];
  }
  const bytes: Record<string, number> = {};
  models.forEach(m => addBytes(bytes, modelAndParts(m)));
  const classes = classCounts(models.map(m => m.className));
  return [
    {
      kind: 'unreachable',
      id: 'unreachable',
      severity: faultSeverity(bytes, facts),
      subject: classes,
      bytes,
      explain: trans =>
        trans._n(
          'Unreachable, waiting for garbage collection (reference cycle), %3: %1 module (%2). Clean GPU runs gc.collect() and frees it.',
          'Unreachable, waiting for garbage collection (reference cycle), %3: %1 modules (%2). Clean GPU runs gc.collect() and frees them.',
          models.length,
          classCounts(
            models.map(m => m.className),
            2
          ),
          formatBytes(sumBytes(bytes))
        ),
      evidence: models.map(m => `${m.label || m.className} (${m.id})`),
      fix: { kind: 'clean', plan: {} }
    }
  ];
};
