/**
 * Cleaned: an info toast after a clean cell (what it freed), one per
 * kernel: a second clean updates it rather than stacking. It hides itself
 * after 8 s. Always on (no setting).
 */
import type { IRuleContext, IToastRule } from './rule';
import { describeCleaned } from './text';

/** How long the "freed" toast stays, milliseconds. */
const CLEANED_AUTO_CLOSE = 8000;

/** The cleaned rule: no buttons. */
export function cleanedRule({ trans }: IRuleContext): IToastRule {
  return {
    id: 'cleaned',
    policy: 'update',
    describes: 'event',
    onCleaned: (model, cleaned) => [
      {
        key: '',
        type: 'success',
        message: describeCleaned(cleaned, trans),
        autoClose: CLEANED_AUTO_CLOSE
      }
    ]
  };
}
