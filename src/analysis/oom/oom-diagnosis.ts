/**
 * CUDA out-of-memory diagnosis: what held the device when a cell failed
 * (holders, the fragmented cache, the toast's summary), built from the
 * agent's `oom` message only (pure functions). What to try is
 * `oom-advice.ts`.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IOom } from '../../protocol';
import { fitText, formatBytes } from '../format';
import { kernelName } from '../processes/kernel-labels';
import { IOomKernels } from '../processes/oom-idle-kernels';

const MiB = 2 ** 20;

/**
 * Smallest `reserved − allocated` (bytes) that counts as a fragmented cache;
 * it must also be at least the failed request: free room in PyTorch's cache
 * that could have held the request but did not means fragmentation.
 */
export const FRAGMENTATION_MIN_BYTES = 256 * MiB;

/** Something that held memory on the device when the cell failed. */
export interface IOomHolder {
  /** `stale`: a model no variable reaches; `traceback`: the last exception; `graphs`: graph holders; `process`: another process. */
  kind: 'stale' | 'traceback' | 'graphs' | 'process';
  /** Model label, or process id for `process`. */
  label: string;
  /** Bytes on the failed device (null: NVML did not say). */
  bytes: number | null;
  /** For a `process` that is one of the user's idle kernels: its name (notebook). */
  kernel?: string;
}

/** The pids of the user's idle kernels of an OOM, by pid: their names (notebooks). */
function idleKernelNames(
  kernels: IOomKernels | null | undefined,
  trans: TranslationBundle
): Map<number, string> {
  return new Map(
    (kernels?.kernels ?? []).map(k => [k.pid, kernelName(k.kernel, trans)])
  );
}

/**
 * What held memory on the failed device, largest first: each stale model,
 * the last traceback, the graph holders, and the other processes by pid
 * (those that are the user's idle kernels, `kernels`, with their notebook).
 * Entries of zero bytes are left out.
 */
export function oomHolders(
  oom: IOom,
  kernels: IOomKernels | null = null,
  trans?: TranslationBundle
): IOomHolder[] {
  const names = trans ? idleKernelNames(kernels, trans) : new Map();
  const holders: IOomHolder[] = [
    ...oom.stale.map(m => ({
      kind: 'stale' as const,
      label: m.label,
      bytes: m.bytes
    })),
    { kind: 'traceback', label: '', bytes: oom.traceback },
    { kind: 'graphs', label: '', bytes: oom.graphs },
    ...oom.processes.map(p => ({
      kind: 'process' as const,
      label: String(p.pid),
      bytes: p.used,
      ...(names.has(p.pid) ? { kernel: names.get(p.pid) } : {})
    }))
  ];
  return holders
    .filter(h => h.bytes === null || h.bytes > 0)
    .sort((a, b) => (b.bytes ?? 0) - (a.bytes ?? 0));
}

/** Bytes of PyTorch's cache that are reserved and not allocated (null when unknown). */
export function idleCache(oom: IOom): number | null {
  return oom.reserved !== null && oom.allocated !== null
    ? Math.max(0, oom.reserved - oom.allocated)
    : null;
}

/**
 * Whether PyTorch's cache looks fragmented: `reserved − allocated` is at
 * least {@link FRAGMENTATION_MIN_BYTES} and at least the failed request.
 */
export function isFragmented(oom: IOom): boolean {
  const idle = idleCache(oom);
  return (
    idle !== null &&
    idle >= Math.max(oom.requested ?? 0, FRAGMENTATION_MIN_BYTES)
  );
}

function cellLabel(oom: IOom): string {
  return oom.executionCount === null ? '[*]' : `[${oom.executionCount}]`;
}

/** One holder in a few words, e.g. `last traceback 256.0 MiB`. */
export function describeHolder(
  holder: IOomHolder,
  trans: TranslationBundle
): string {
  const bytes = formatBytes(holder.bytes);
  switch (holder.kind) {
    case 'stale':
      return trans.__('stale %1 %2', holder.label, bytes);
    case 'traceback':
      return trans.__('last traceback %1', bytes);
    case 'graphs':
      return trans.__('autograd graphs %1', bytes);
    case 'process':
      return holder.kernel !== undefined
        ? trans.__(
            'your idle kernel of %1 (pid %2) %3',
            holder.kernel,
            holder.label,
            bytes
          )
        : trans.__('pid %1 %2', holder.label, bytes);
  }
}

/**
 * What held the device, by kind, for the toast: all stale models together,
 * the last traceback, the graph holders, the user's idle kernels together
 * (`kernels`), all other processes together; the largest first, zero left
 * out, in few words to fit a toast. E.g.
 * `["graphs 1.0 GiB", "traceback 256.0 MiB", "2 stale models 24.2 MiB"]`.
 */
export function summarizeHolders(
  oom: IOom,
  trans: TranslationBundle,
  kernels: IOomKernels | null = null
): string[] {
  const staleBytes = oom.stale.reduce((sum, m) => sum + m.bytes, 0);
  const idle = new Set((kernels?.kernels ?? []).map(k => k.pid));
  const rest = oom.processes.filter(p => !idle.has(p.pid));
  const others = rest.reduce((sum, p) => sum + (p.used ?? 0), 0);
  const kinds: Array<[number, string]> = [
    [
      staleBytes,
      trans._n(
        '%1 stale model %2',
        '%1 stale models %2',
        oom.stale.length,
        formatBytes(staleBytes)
      )
    ],
    [oom.traceback, trans.__('traceback %1', formatBytes(oom.traceback))],
    [oom.graphs, trans.__('graphs %1', formatBytes(oom.graphs))],
    [
      kernels?.bytes ?? 0,
      trans._n(
        'your idle kernel %2',
        '%1 idle kernels of yours %2',
        kernels?.kernels.length ?? 0,
        formatBytes(kernels?.bytes ?? 0)
      )
    ],
    [
      others,
      trans._n(
        'other process %2',
        '%1 other processes %2',
        rest.length,
        formatBytes(others)
      )
    ]
  ];
  return kinds
    .filter(([bytes]) => bytes > 0)
    .sort((a, b) => b[0] - a[0])
    .map(([, text]) => text);
}

/**
 * The headline of the OOM toast, at most 140 characters: "CUDA out of memory
 * in cell [7]: tried to allocate 20.0 MiB, 3.2 MiB free of 79.2 GiB. Held:
 * graphs 1.0 GiB, traceback 256.0 MiB +1 more". What held the
 * device ({@link summarizeHolders}, the user's idle `kernels` apart) is
 * added, largest first, while it fits.
 */
export function describeOom(
  oom: IOom,
  trans: TranslationBundle,
  kernels: IOomKernels | null = null
): string {
  const figures: string[] = [];
  if (oom.requested !== null) {
    figures.push(trans.__('tried to allocate %1', formatBytes(oom.requested)));
  }
  if (oom.free !== null && oom.total !== null) {
    figures.push(
      trans.__('%1 free of %2', formatBytes(oom.free), formatBytes(oom.total))
    );
  } else if (oom.total !== null) {
    figures.push(trans.__('%1 in total', formatBytes(oom.total)));
  }
  const head = figures.length
    ? trans.__(
        'CUDA out of memory in cell %1: %2.',
        cellLabel(oom),
        figures.join(', ')
      )
    : trans.__('CUDA out of memory in cell %1.', cellLabel(oom));
  const holders = summarizeHolders(oom, trans, kernels);
  // the most holders that fit, the others counted in words
  const candidates = holders.map((_, i) => {
    const shown = holders.length - i;
    return trans.__(
      '%1 Held: %2',
      head,
      shown < holders.length
        ? trans.__(
            '%1 and %2 more',
            holders.slice(0, shown).join(', '),
            holders.length - shown
          )
        : holders.join(', ')
    );
  });
  return fitText([...candidates, head]);
}
