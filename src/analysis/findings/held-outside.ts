/**
 * Held outside: a model no root reaches that is not garbage either (agent
 * 0.12.0, `model.outside`). Either the agent found what holds it, searching
 * up its referrers to a module's globals or the notebook's namespace —
 * another module's global (`helpers._MODEL`), a class attribute, a paused
 * generator — or it was already reached by nothing before a full
 * `gc.collect()` and is still alive after it (a running thread's local).
 * Clean GPU's `gc.collect()` cannot free such a model, so none is offered:
 * the finding names the holder, and a kernel restart frees it. One finding
 * per model; severity on the one scale (`./severity.ts`).
 */
import { formatBytes, sumBytes } from '../format';
import { modelAndParts } from './user-models';
import type { FindingRule, IFinding } from './types';
import { faultSeverity } from './severity';

/** The held-outside rule. */
export const heldOutsideRule: FindingRule = facts =>
  (facts.inventory?.models ?? [])
    .filter(m => m.outside && m.stale)
    .map((m): IFinding => {
      const bytes = modelAndParts(m);
      const outside = m.outside!;
      const what = `${m.label || m.className}`;
      return {
        kind: 'held-outside',
        id: `held-outside:${m.id}`,
        severity: faultSeverity(bytes, facts),
        subject: what,
        bytes,
        explain: trans =>
          outside.holder
            ? trans.__(
                "%1 (%2) is held outside the notebook's variables, by %3. Clean GPU cannot free it: drop that reference, or restart the kernel.",
                what,
                formatBytes(sumBytes(bytes)),
                outside.holder
              )
            : trans.__(
                '%1 (%2) survived gc.collect() although no variable, output or traceback reaches it: something the agent cannot read keeps it (a C extension, a thread, gc.freeze()). Clean GPU cannot free it; restarting the kernel does.',
                what,
                formatBytes(sumBytes(bytes))
              ),
        evidence: [
          `${m.className} (${m.id})`,
          ...(outside.holder ? [outside.holder] : []),
          ...(outside.survived ? ['survived gc.collect()'] : [])
        ],
        fix: { kind: 'restart', bytes }
      };
    });
