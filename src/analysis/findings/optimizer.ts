/**
 * Optimizers named by user variables (`inventory.optimizers`).
 *
 * - **Stranded** (`orphaned` parameters: in no live model, held by no other
 *   variable): the model is gone
 *   (`del model`, or the model cell re-run while the old optimizer stays).
 *   No module is left, yet its `param_groups` keep every parameter, each
 *   parameter its gradient, and its `state` the moments (AdamW: twice the
 *   parameters): `gc.collect()` and `empty_cache()` free none of it.
 *   Warning when on a CUDA device, else info.
 * - **Otherwise** (a live model's, or parameters a variable names): its
 *   state is memory the training needs; told as an info (what deleting it
 *   returns once training is done).
 *
 * Bytes: the optimizer's state, and the stranded parameters and their
 * gradients, each storage once. Fix: **Delete opt, sched…** (asks): the
 * optimizer with the variables that keep it in turn (an LR scheduler, a
 * wrapper, a GradScaler with state for it), since deleting it alone would
 * free nothing while they hold it. No "Move to CPU…": an optimizer is not a
 * tensor container the move cell can empty.
 */
import type { IStrandedOptimizer } from '../../protocol';
import { formatBytes, sumBytes } from '../format';
import { isPythonIdentifier } from '../python';
import type { FindingRule, IFinding } from './types';
import { faultSeverity } from './severity';

/** The optimizers and the variables that keep them (no other rule lists them). */
export function optimizerNames(
  optimizers: ReadonlyArray<IStrandedOptimizer> | undefined
): Set<string> {
  return new Set((optimizers ?? []).flatMap(o => [o.name, ...o.referencedBy]));
}

/** The optimizer rule: one finding per optimizer that keeps bytes. */
export const optimizerRule: FindingRule = facts => {
  const { inventory } = facts;
  const found: IFinding[] = [];
  for (const optimizer of inventory?.optimizers ?? []) {
    const bytes = { ...optimizer.bytes };
    if (sumBytes(bytes) <= 0) {
      continue;
    }
    const stranded = optimizer.orphaned > 0;
    const others = optimizer.referencedBy.filter(isPythonIdentifier);
    const { parameters, gradients, state } = optimizer.parts;
    const together = optimizer.referencedBy.length
      ? (trans: Parameters<IFinding['explain']>[0]) =>
          ` ${trans.__(
            '%1 keeps %2 too: delete them together.',
            optimizer.referencedBy.join(', '),
            optimizer.name
          )}`
      : () => '';
    found.push({
      kind: 'optimizer',
      id: `optimizer:${optimizer.name}`,
      // a live model's optimizer state is its training, not a fault: info
      severity: stranded ? faultSeverity(bytes, facts) : 'info',
      subject: optimizer.name,
      bytes,
      explain: trans =>
        (stranded
          ? trans.__(
              '%1 (%2) keeps the weights of a deleted model: %3 (parameters %4, gradients %5, optimizer state %6).',
              optimizer.name,
              optimizer.className,
              formatBytes(sumBytes(bytes)),
              formatBytes(sumBytes(parameters)),
              formatBytes(sumBytes(gradients)),
              formatBytes(sumBytes(state))
            )
          : trans.__(
              '%1 (%2) keeps optimizer state: %3, freed by deleting %1 once training is done (the parameters stay).',
              optimizer.name,
              optimizer.className,
              formatBytes(sumBytes(bytes))
            )) + together(trans),
      evidence: [
        ...(stranded ? [`${optimizer.name}.param_groups`] : []),
        `${optimizer.name}.state`,
        ...optimizer.referencedBy
      ],
      fix: isPythonIdentifier(optimizer.name)
        ? {
            kind: 'delete-variable',
            name: optimizer.name,
            ...(others.length ? { with: others } : {})
          }
        : { kind: 'none' }
    });
  }
  return found;
};
