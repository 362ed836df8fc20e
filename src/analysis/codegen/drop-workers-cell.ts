/**
 * The cell that drops DataLoader workers (the `child-processes` finding's
 * fix, `CommandIDs.dropWorkers`): for each named variable that is a
 * DataLoader or one of its multiprocessing iterators, it shuts the workers
 * down with the iterator's own `_shutdown_workers()` (what torch runs when
 * the iterator is deleted or exhausted; idempotent, it joins the workers
 * and terminates those that do not exit) and deletes the variable. Works
 * without the extension; safe to re-run.
 */
import type { IInventory } from '../../protocol';
import {
  commentLines,
  helperHead,
  isPythonIdentifier,
  pyHeld
} from '../python';

/** First line of the cell: tells the cell apart (tests, the user). */
export const DROP_WORKERS_MARKER = '# gpu-hygiene: drop_workers';

/**
 * The Python source of the cell, or null when no name is a Python
 * identifier (only identifiers ever reach the code).
 *
 * @param names - the user variables to drop.
 * @param workers - how many worker processes they keep (for the comment).
 * @param valueIds - each name's holder `valueId`: the cell leaves a name
 *   alone when it holds another object by then.
 */
export function generateDropWorkersCell(
  names: ReadonlyArray<string>,
  workers: number,
  valueIds: Readonly<Record<string, string>> = {}
): string | null {
  const kept = [...new Set(names.filter(isPythonIdentifier))];
  if (!kept.length) {
    return null;
  }
  // one (name, id) pair a line: an id is up to 18 characters
  const pairs = kept.map(n => `\n        ("${n}", ${pyHeld(valueIds[n])})`);
  const tuple = `(${pairs.join(',')}${kept.length === 1 ? ',' : ''})`;
  return [
    DROP_WORKERS_MARKER,
    ...commentLines(
      `Inserted by jupyterlab-gpu-hygiene: ${kept.join(', ')} ${kept.length === 1 ? 'keeps' : 'keep'} ${workers} DataLoader worker process${workers === 1 ? '' : 'es'} alive.`
    ),
    "# It shuts them down (the iterator's own _shutdown_workers(), as torch",
    '# does when an iterator is deleted) and deletes these names. Re-create',
    '# the loader to train again. Safe to re-run.',
    ...helperHead('_gpu_hygiene_drop_workers', `names=${tuple}`),
    '    import sys',
    '    from IPython import get_ipython',
    '    dl = sys.modules.get("torch.utils.data.dataloader")',
    '    ns = get_ipython().user_ns',
    '    for name, held in names:',
    '        if held is not None and name in ns and id(ns[name]) != held:',
    '            print(f"# {name} changed since the finding: kept")',
    '            continue',
    '        obj = ns.pop(name, None)',
    '        if dl is None or obj is None:',
    '            continue',
    '        its = [obj]',
    '        if isinstance(obj, dl.DataLoader):  # persistent_workers keeps one',
    '            its = list(vars(obj).values())',
    '        for it in its:',
    '            if isinstance(it, dl._MultiProcessingDataLoaderIter):',
    '                it._shutdown_workers()',
    '',
    '_gpu_hygiene_drop_workers()',
    ''
  ].join('\n');
}

/** What the drop command drops: the names and the workers they keep. */
export interface IWorkersToDrop {
  /** User variables (identifiers) that are a loader or iterator keeping workers. */
  names: string[];
  /** Of `names`, the `valueId` of each holder that has one. */
  valueIds: Record<string, string>;
  /** The workers those variables keep, sorted. */
  pids: number[];
}

/**
 * The names of `requested` that the inventory's `children` fact says keep
 * workers themselves (holder of kind `variable` whose path is the name),
 * Python identifiers only, and the workers they keep.
 */
export function workersToDrop(
  inventory: IInventory | null,
  requested: unknown
): IWorkersToDrop {
  const wanted = new Set(
    Array.isArray(requested)
      ? requested.filter((n): n is string => typeof n === 'string')
      : []
  );
  const holders = (inventory?.children?.holders ?? []).filter(
    h =>
      h.kind === 'variable' &&
      h.path === h.name &&
      wanted.has(h.name) &&
      isPythonIdentifier(h.name)
  );
  const valueIds: Record<string, string> = {};
  for (const h of holders) {
    if (h.valueId) {
      valueIds[h.name] = h.valueId;
    }
  }
  return {
    names: [...new Set(holders.map(h => h.name))],
    valueIds,
    pids: [...new Set(holders.flatMap(h => h.pids))].sort((a, b) => a - b)
  };
}
