/**
 * Child processes of the kernel (the inventory's `children` fact): the
 * DataLoader workers that user names keep alive (a DataLoader with
 * `persistent_workers=True`, an iterator left half consumed), one finding
 * per group of holders sharing workers; the other children, one info; and,
 * where the kernel's children cannot be listed (no `/proc`, no psutil), one
 * info that says so, so that the panel never shows "no workers" it cannot
 * see; and the workers a previous kernel left running (`orphans`, after a
 * restart): a warning naming their pids (no button: the kernel cannot tell
 * whether they are still wanted; the text gives the `kill` line).
 *
 * Bytes are host memory (`cpu`: the workers' RSS; a forked worker's RSS
 * counts pages it still shares with the kernel). A group is a warning when
 * one of its workers holds a CUDA context or their RSS reaches
 * {@link WORKERS_WARN_RSS}, else info. Fix: "Drop <names>…" (asks): a cell
 * that shuts the workers down and deletes the variables that are the
 * loader or iterator themselves (identifiers only); none when no such
 * variable exists.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IChildProcess, IChildren, IWorkerHolder } from '../../protocol';
import { formatBytes, listNames } from '../format';
import { isPythonIdentifier } from '../python';
import type { FindingFix, FindingRule, IFinding } from './types';

/**
 * Workers' RSS from which a group is a warning (4 GiB): an idle torch
 * worker forked from a kernel measured ~307 MiB RSS, nearly all shared with
 * the kernel, so only well above a dozen idle workers' worth is memory
 * they hold of their own (dataset copies, prefetched batches).
 */
export const WORKERS_WARN_RSS = 4 * 2 ** 30;

/** Holders that share workers, merged; in the agent's order. */
function groups(holders: ReadonlyArray<IWorkerHolder>): IWorkerHolder[][] {
  const out: IWorkerHolder[][] = [];
  for (const holder of holders) {
    const pids = new Set(holder.pids);
    const hit = out.filter(g => g.some(h => h.pids.some(p => pids.has(p))));
    const merged = [...hit.flat(), holder];
    out.splice(0, out.length, ...out.filter(g => !hit.includes(g)), merged);
  }
  return out;
}

/**
 * The variables to drop for a group: user variables that are themselves
 * the loader or iterator (`path` equals `name`), Python identifiers only.
 */
export function workerNames(group: ReadonlyArray<IWorkerHolder>): string[] {
  return [
    ...new Set(
      group
        .filter(
          h =>
            h.kind === 'variable' &&
            h.path === h.name &&
            isPythonIdentifier(h.name)
        )
        .map(h => h.name)
    )
  ];
}

/** What a group's explanation tells: its workers, with RSS and CUDA contexts where seen. */
interface IWorkerGroup {
  /** The workers' pids, sorted. */
  pids: number[];
  /** The holders' paths, in the agent's order. */
  paths: string[];
  /** Some holder has `persistent_workers=True`. */
  persistent: boolean;
  /** The workers' RSS, bytes (those the agent lists). */
  rss: number;
  /** Workers with a CUDA context, and those where it is not known. */
  withCuda: number;
  unknown: number;
}

/** The explanation of a group's finding; `children` says whether its memory is seen. */
function explainWorkers(
  g: IWorkerGroup,
  children: IChildren
): (trans: TranslationBundle) => string {
  return trans => {
    const by = g.persistent
      ? trans.__('%1 (persistent_workers=True)', listNames(g.paths, 3, trans))
      : listNames(g.paths, 3, trans);
    if (children.visible && g.unknown) {
      return trans._n(
        '%1 DataLoader worker (%2 RSS, %3 with a CUDA context, %4 unknown) kept alive by %5.',
        '%1 DataLoader workers (%2 RSS, %3 with a CUDA context, %4 unknown) kept alive by %5.',
        g.pids.length,
        formatBytes(g.rss),
        g.withCuda,
        g.unknown,
        by
      );
    }
    return children.visible
      ? trans._n(
          '%1 DataLoader worker (%2 RSS, %3 with a CUDA context) kept alive by %4.',
          '%1 DataLoader workers (%2 RSS, %3 with a CUDA context) kept alive by %4.',
          g.pids.length,
          formatBytes(g.rss),
          g.withCuda,
          by
        )
      : trans._n(
          '%1 DataLoader worker kept alive by %2; its memory cannot be seen from this kernel (%3).',
          '%1 DataLoader workers kept alive by %2; their memory cannot be seen from this kernel (%3).',
          g.pids.length,
          by,
          children.reason ?? '?'
        );
  };
}

/** The finding of one group of holders sharing workers (see the file's comment). */
function workersFinding(
  group: ReadonlyArray<IWorkerHolder>,
  children: IChildren,
  byPid: ReadonlyMap<number, IChildProcess>
): IFinding {
  const pids = [...new Set(group.flatMap(h => h.pids))].sort((a, b) => a - b);
  const seen = pids
    .map(p => byPid.get(p))
    .filter((p): p is IChildProcess => p !== undefined);
  const g: IWorkerGroup = {
    pids,
    paths: group.map(h => h.path),
    persistent: group.some(h => h.persistent),
    rss: seen.reduce((sum, p) => sum + p.rss, 0),
    withCuda: seen.filter(p => p.cuda === true).length,
    unknown: seen.filter(p => p.cuda === null).length
  };
  const names = workerNames(group);
  const fix: FindingFix = names.length
    ? { kind: 'drop-workers', names, pids }
    : { kind: 'none' };
  return {
    kind: 'child-processes',
    id: `child-processes:${pids.join(',')}`,
    severity: g.withCuda > 0 || g.rss >= WORKERS_WARN_RSS ? 'warning' : 'info',
    subject: g.paths.join(', '),
    bytes: children.visible ? { cpu: g.rss } : {},
    explain: explainWorkers(g, children),
    evidence: [
      ...group.map(h => `${h.path} (${h.className})`),
      ...seen.map(p => workerEvidence(p))
    ],
    fix
  };
}

/** The info about the kernel's children that no user variable keeps (they end with the kernel). */
function otherChildrenFinding(others: ReadonlyArray<IChildProcess>): IFinding {
  const rss = others.reduce((sum, p) => sum + p.rss, 0);
  const withCuda = others.filter(p => p.cuda === true).length;
  return {
    kind: 'child-processes',
    id: 'child-processes:other',
    severity: 'info',
    subject: [...new Set(others.map(p => p.name))].join(', '),
    bytes: { cpu: rss },
    explain: trans =>
      trans._n(
        '%1 other child process of the kernel (%2 RSS, %3 with a CUDA context): no user variable keeps it; it ends with the kernel.',
        '%1 other child processes of the kernel (%2 RSS, %3 with a CUDA context): no user variable keeps them; they end with the kernel.',
        others.length,
        formatBytes(rss),
        withCuda
      ),
    evidence: others.map(p => workerEvidence(p)),
    fix: { kind: 'none' }
  };
}

/** The warning about workers a previous kernel left running, with the `kill` line. */
function orphansFinding(orphans: ReadonlyArray<IChildProcess>): IFinding {
  const rss = orphans.reduce((sum, p) => sum + p.rss, 0);
  const withCuda = orphans.filter(p => p.cuda === true).length;
  const pids = orphans.map(p => p.pid).sort((a, b) => a - b);
  return {
    kind: 'child-processes',
    id: `child-processes:orphans:${pids.join(',')}`,
    severity: 'warning',
    subject: `pid ${pids.join(', ')}`,
    bytes: { cpu: rss },
    explain: trans =>
      trans._n(
        '%1 DataLoader worker of a previous kernel still runs (%2 RSS, %3 with a CUDA context): end it with kill %4.',
        '%1 DataLoader workers of a previous kernel still run (%2 RSS, %3 with a CUDA context): end them with kill %4.',
        orphans.length,
        formatBytes(rss),
        withCuda,
        pids.join(' ')
      ),
    evidence: orphans.map(p => workerEvidence(p)),
    fix: { kind: 'none' }
  };
}

/** The info that the kernel's children cannot be listed here, and why. */
function unseenFinding(children: IChildren): IFinding {
  return {
    kind: 'child-processes',
    id: 'child-processes:unseen',
    severity: 'info',
    subject: 'child processes',
    bytes: {},
    explain: trans =>
      trans.__(
        'The kernel’s child processes (DataLoader workers) cannot be seen here: %1. Install psutil in the kernel’s environment to see them.',
        children.reason ?? '?'
      ),
    evidence: [],
    fix: { kind: 'none' }
  };
}

/** The child-processes rule. */
export const childProcessesRule: FindingRule = ({ inventory }) => {
  const children = inventory?.children;
  if (!children) {
    return [];
  }
  const byPid = new Map<number, IChildProcess>(
    children.processes.map(p => [p.pid, p])
  );
  const held = new Set(children.holders.flatMap(h => h.pids));
  const out = groups(children.holders).map(group =>
    workersFinding(group, children, byPid)
  );
  const others = children.processes.filter(p => !held.has(p.pid));
  if (others.length) {
    out.push(otherChildrenFinding(others));
  }
  const orphans = children.orphans ?? [];
  if (orphans.length) {
    out.push(orphansFinding(orphans));
  }
  if (!children.visible && !children.holders.length) {
    out.push(unseenFinding(children));
  }
  return out;
};

/**
 * `pid 4242 pt_data_worker: RSS 301.0 MiB, CUDA (nvml)`: technical terms
 * only, not translated (like holder paths).
 */
function workerEvidence(p: IChildProcess): string {
  const cuda = p.cuda === true ? `, CUDA (${p.cudaSource ?? '?'})` : '';
  return `pid ${p.pid} ${p.name}: RSS ${formatBytes(p.rss)}${cuda}`;
}
