/**
 * Kept errors: a caught exception stored in a user variable (`err = e` in
 * an `except`, the errors an out-of-memory retry loop appends to a list).
 * Its `__traceback__` keeps every frame the error passed through and their
 * locals: the activations of the failed step stay alive after the error
 * was handled, through the variable, not through `sys.last_*` (that is the
 * `traceback-tensors` finding).
 *
 * One finding per kept exception (`inventory.keptErrors`). Bytes: the
 * tensors reached through its frames, each storage once. Evidence: `err →
 * step → .acts` per frame. Warning when they are on a CUDA device, else
 * info. Fix: **Delete err…** (asks) for a variable whose name is a Python
 * identifier; Clean GPU also clears those frames' locals (keeping the
 * exception) where the variable names the exception itself, and the text
 * says so only then (not for `errors[1]` in a list).
 */
import type { IKeptError } from '../../protocol';
import { formatBytes, sumBytes } from '../format';
import { isPythonIdentifier } from '../python';
import type { FindingRule, IFinding } from './types';
import { faultSeverity } from './severity';

/** `err → step → .acts` (the frame's largest local), one line per frame. */
export function keptErrorChain(error: IKeptError): string[] {
  return error.frames.map(
    f => `${error.path} → ${f.name} → ${f.local.replace(/^\./, '')}`
  );
}

/** The variables a finding of this kind is about (no other rule lists them). */
export function keptErrorNames(
  errors: ReadonlyArray<IKeptError> | undefined
): Set<string> {
  return new Set((errors ?? []).map(e => e.name));
}

/** The kept-error rule: one finding per exception a variable keeps. */
export const keptErrorRule: FindingRule = facts => {
  const { inventory } = facts;
  const found: IFinding[] = [];
  for (const error of inventory?.keptErrors ?? []) {
    const bytes = { ...error.bytes };
    if (sumBytes(bytes) <= 0) {
      continue;
    }
    const chain = keptErrorChain(error);
    const largest = error.frames[0];
    if (!largest) {
      continue; // its bytes come from its frames: none reported, nothing to tell
    }
    // Clean GPU clears the frames of an error a variable names itself (planClean)
    const cleared = error.path === error.name;
    found.push({
      kind: 'kept-error',
      id: `kept-error:${error.path}`,
      severity: faultSeverity(bytes, facts),
      subject: error.path,
      bytes,
      explain: trans =>
        `${trans.__(
          '%1 keeps a caught %2 whose traceback keeps the frames of the failed call and their tensors: %3 (%4 through %5).',
          error.path,
          error.type,
          formatBytes(sumBytes(bytes)),
          formatBytes(sumBytes(largest.bytes)),
          chain[0]
        )} ${
          cleared
            ? trans.__(
                'Delete %1, or let Clean GPU clear those frames.',
                error.name
              )
            : trans.__('Delete %1 to free them.', error.name)
        }`,
      evidence: chain,
      fix: isPythonIdentifier(error.name)
        ? { kind: 'delete-variable', name: error.name }
        : { kind: 'none' }
    });
  }
  return found;
};
