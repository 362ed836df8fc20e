/**
 * The findings' rules (this folder's index, ~5 KB gzip) are not on
 * JupyterLab's start path: the status bar gauge summarises them only for a
 * kernel, so they load when its first kernel appears (its agent has not
 * said anything yet: the agent's own chunk loads then too).
 *
 * The toasts' and the panel's chunks import the rules directly (they load
 * later anyway); this loader is for start-path code: the gauge reads
 * {@link loadedFindings} and asks {@link loadFindings} when it is null.
 */
import type * as FindingsModule from './index';

/** The rules' module: `findings`, `factsOf`, `summarizeFindings`, ... */
export type FindingsModuleType = typeof FindingsModule;

let loaded: FindingsModuleType | null = null;
let pending: Promise<FindingsModuleType> | null = null;

/** The rules when their chunk has loaded, else null. */
export function loadedFindings(): FindingsModuleType | null {
  return loaded;
}

/**
 * Load the rules' chunk (once; a failed load is tried again at the next
 * call).
 *
 * @returns the module. Rejects when the chunk cannot be loaded.
 */
export function loadFindings(): Promise<FindingsModuleType> {
  if (!pending) {
    pending = import('./index').then(
      module => (loaded = module),
      reason => {
        pending = null;
        throw reason;
      }
    );
  }
  return pending;
}
