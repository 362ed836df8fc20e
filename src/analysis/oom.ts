/**
 * CUDA out-of-memory diagnosis: what held the device when a cell failed, and
 * what to try, built from the agent's `oom` message only (pure functions).
 *
 * Advice is chosen by rules on the figures and on the versions imported in
 * the kernel. Ultralytics facts, read in its source (`cfg/default.yaml`,
 * `engine/trainer.py`, `utils/autobatch.py`) for 8.0 and 8.4.190:
 * - `batch=-1` runs AutoBatch on a single GPU (every 8.x);
 * - `batch=0.70` (a fraction of GPU memory for AutoBatch) exists from 8.2.29
 *   (ultralytics/ultralytics#13446; 8.2.28 rejects it, #13750);
 * - the trainer halves `batch` and retries, up to 3 times, when CUDA runs out
 *   of memory in the first epoch of single-GPU training, from 8.4.13
 *   (ultralytics/ultralytics#23590);
 * - gradients accumulate over `round(nbs / batch)` batches with `nbs: 64`, so a
 *   smaller batch keeps the effective batch (every 8.x);
 * - validation during training runs at twice the batch for detection;
 * - `cache: False`, `workers: 8` and `imgsz: 640` are the defaults; the image
 *   cache lives in CPU RAM (`ram`) or on disk, data-loader workers are CPU
 *   processes: neither uses VRAM;
 * - `amp: True` is the default: nothing is said about AMP (the message cannot
 *   tell whether the user turned it off).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IOom } from '../protocol';
import { formatBytes, formatIdle, MAX_TOAST } from './format';
import { IOomKernels, kernelName } from './gpuprocesses';

const MiB = 2 ** 20;

/** First Ultralytics version with a fractional `batch` (AutoBatch at that share of GPU memory). */
export const ULTRALYTICS_FRACTION_BATCH = '8.2.29';
/** First Ultralytics version whose trainer halves `batch` and retries after a first-epoch CUDA OOM. */
export const ULTRALYTICS_OOM_RETRY = '8.4.13';
/** First torch version with `expandable_segments` in `PYTORCH_CUDA_ALLOC_CONF`. */
export const TORCH_EXPANDABLE_SEGMENTS = '2.1';
/**
 * Smallest `reserved − allocated` (bytes) that counts as a fragmented cache;
 * it must also be at least the failed request: free room in PyTorch's cache
 * that could have held the request but did not means fragmentation.
 */
export const FRAGMENTATION_MIN_BYTES = 256 * MiB;

/**
 * Parse the numeric release of a version string: `"8.4.190"` → `[8, 4, 190]`,
 * `"2.14.1+cu130"` → `[2, 14, 1]`, `"2.3.0a0"` → `[2, 3, 0]`.
 *
 * @returns null when the string does not start with a number.
 */
export function parseVersion(
  version: string | null | undefined
): number[] | null {
  const match = /^\s*v?(\d+(?:\.\d+)*)/.exec(version ?? '');
  return match ? match[1].split('.').map(Number) : null;
}

/**
 * Whether `version` is at least `minimum` (missing parts count as 0).
 *
 * @returns null when `version` cannot be parsed (say nothing version-specific then).
 */
export function versionAtLeast(
  version: string | null | undefined,
  minimum: string
): boolean | null {
  const have = parseVersion(version);
  const need = parseVersion(minimum) ?? [];
  if (!have) {
    return null;
  }
  for (let i = 0; i < Math.max(have.length, need.length); i++) {
    const a = have[i] ?? 0;
    const b = need[i] ?? 0;
    if (a !== b) {
      return a > b;
    }
  }
  return true;
}

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
  let text = head;
  for (let shown = holders.length; shown > 0; shown--) {
    const more =
      shown < holders.length
        ? trans.__(' +%1 more', holders.length - shown)
        : '';
    const candidate = trans.__(
      '%1 Held: %2%3',
      head,
      holders.slice(0, shown).join(', '),
      more
    );
    if (candidate.length <= MAX_TOAST) {
      text = candidate;
      break;
    }
  }
  return text.length <= MAX_TOAST ? text : `${text.slice(0, MAX_TOAST - 1)}…`;
}

/** One piece of advice. */
export interface IAdvice {
  /** Stable id of the rule that produced it (tests, styling). */
  id: string;
  /** The advice, translated. */
  text: string;
  /**
   * Kernels the advice offers to shut down (`idle-kernels`): ids of the
   * server's answer, with their names; absent for other advice.
   */
  shutDown?: Array<{ kernelId: string; name: string }>;
}

/** Most idle kernels named in the advice (the rest are counted). */
const ADVICE_MAX_KERNELS = 3;

/**
 * What to try after a CUDA out-of-memory error, most specific first.
 *
 * First, when the user's own idle kernels (`kernels`, see `oomIdleKernels`)
 * held most of the device: `idle-kernels`, naming them, with a Shut down
 * action for each one the server lists. Their pids are then left out of
 * `processes`.
 *
 * Rules on the figures (any library):
 * - `clean`: stale models or the last traceback hold bytes → Clean GPU frees them;
 * - `graphs`: graph holders keep bytes → store `loss.item()` / `loss.detach()`, `torch.no_grad()`;
 * - `processes`: other processes use the device → stop them or choose another GPU;
 * - `too-large`: the request alone exceeds the device;
 * - `fragmentation`: {@link isFragmented} → `expandable_segments:True`
 *   (torch ≥ 2.1; older torch: say that it needs 2.1).
 *
 * With Ultralytics imported (`ultralytics` version set): `batch=-1`
 * (AutoBatch), `batch=0.70` only from 8.2.29, the first-epoch retry only
 * from 8.4.13, gradient accumulation to `nbs=64`, `imgsz`, and what `cache`
 * and `workers` do (CPU RAM, not VRAM). Without it: a smaller batch with
 * gradient accumulation, `torch.no_grad()` for evaluation, `del` + Clean GPU.
 */
export function oomAdvice(
  oom: IOom,
  trans: TranslationBundle,
  kernels: IOomKernels | null = null
): IAdvice[] {
  const advice: IAdvice[] = [];
  const idle = kernels?.mostly ? kernels : null;
  if (idle) {
    const shown = idle.kernels.slice(0, ADVICE_MAX_KERNELS);
    const named = shown
      .map(k =>
        k.kernel.idleSeconds !== null && k.kernel.idleSource === 'cells'
          ? trans.__(
              '%1 (%2, idle for %3)',
              kernelName(k.kernel, trans),
              formatBytes(k.bytes),
              formatIdle(k.kernel.idleSeconds)
            )
          : trans.__(
              '%1 (%2, idle)',
              kernelName(k.kernel, trans),
              formatBytes(k.bytes)
            )
      )
      .join(', ');
    const more =
      idle.kernels.length > shown.length
        ? trans.__(' and %1 more', idle.kernels.length - shown.length)
        : '';
    advice.push({
      id: 'idle-kernels',
      text: trans._n(
        'Your own idle kernel holds %2 of the %3 in use on this GPU: %4%5. Shut it down to free that memory (its variables are lost).',
        'Your own idle kernels hold %2 of the %3 in use on this GPU: %4%5. Shut them down to free that memory (their variables are lost).',
        idle.kernels.length,
        formatBytes(idle.bytes),
        formatBytes(idle.inUse),
        named,
        more
      ),
      shutDown: idle.kernels
        .filter(k => k.kernel.inServer)
        .slice(0, ADVICE_MAX_KERNELS)
        .map(k => ({
          kernelId: k.kernel.id,
          name: kernelName(k.kernel, trans)
        }))
    });
  }
  const idlePids = new Set((idle?.kernels ?? []).map(k => k.pid));
  const staleBytes = oom.stale.reduce((sum, m) => sum + m.bytes, 0);
  const freeable = staleBytes + oom.traceback;
  if (freeable > 0) {
    advice.push({
      id: 'clean',
      text: trans.__(
        'Clean GPU frees %1 now: stale models and the last traceback, without touching your variables.',
        formatBytes(freeable)
      )
    });
  }
  if (oom.graphs > 0) {
    advice.push({
      id: 'graphs',
      text: trans.__(
        'Variables keep autograd graphs alive (%1): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
        formatBytes(oom.graphs)
      )
    });
  }
  const others = oom.processes.filter(
    p => !idlePids.has(p.pid) && (p.used === null || p.used > 0)
  );
  if (others.length) {
    const used = others.reduce((sum, p) => sum + (p.used ?? 0), 0);
    const pids = others
      .slice(0, 3)
      .map(p => String(p.pid))
      .join(', ');
    advice.push({
      id: 'processes',
      text: trans.__(
        'Other processes use %1 of this GPU (pid %2%3): stop them or run on another GPU.',
        formatBytes(used),
        pids,
        others.length > 3 ? ', …' : ''
      )
    });
  }
  if (
    oom.requested !== null &&
    oom.total !== null &&
    oom.requested > oom.total
  ) {
    advice.push({
      id: 'too-large',
      text: trans.__(
        'One allocation of %1 is larger than the whole GPU (%2): the batch or the tensor itself must shrink.',
        formatBytes(oom.requested),
        formatBytes(oom.total)
      )
    });
  }
  if (isFragmented(oom)) {
    const idle = formatBytes(idleCache(oom));
    advice.push({
      id: 'fragmentation',
      text:
        versionAtLeast(oom.torch, TORCH_EXPANDABLE_SEGMENTS) === false
          ? trans.__(
              'PyTorch had %1 reserved but unallocated and still could not place the request: its cache is fragmented. torch 2.1 and later avoid this with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.',
              idle
            )
          : trans.__(
              'PyTorch had %1 reserved but unallocated and still could not place the request: its cache is fragmented. Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the kernel’s environment and restart the kernel (it is read when CUDA starts).',
              idle
            )
    });
  }
  if (oom.ultralytics !== null) {
    advice.push(...ultralyticsAdvice(oom.ultralytics, trans));
  } else {
    advice.push(
      {
        id: 'batch',
        text: trans.__(
          'Use a smaller batch; to keep the effective batch, accumulate gradients over several batches before optimizer.step().'
        )
      },
      {
        id: 'no-grad',
        text: trans.__(
          'Run evaluation and inference under torch.no_grad() (or torch.inference_mode()): no autograd graph is kept.'
        )
      },
      {
        id: 'del',
        text: trans.__(
          'del the tensors and models you no longer need, then Clean GPU: it collects them and returns PyTorch’s cache with torch.cuda.empty_cache().'
        )
      }
    );
  }
  return advice;
}

/** Ultralytics advice for the installed version (see the module comment for the facts). */
function ultralyticsAdvice(
  version: string,
  trans: TranslationBundle
): IAdvice[] {
  const fraction = versionAtLeast(version, ULTRALYTICS_FRACTION_BATCH) === true;
  const retry = versionAtLeast(version, ULTRALYTICS_OOM_RETRY) === true;
  const advice: IAdvice[] = [
    {
      id: 'ultralytics-batch',
      text: fraction
        ? trans.__(
            'Ultralytics %1: train with batch=-1 to let AutoBatch pick a batch that fits this GPU, or batch=0.70 to aim at 70%% of its memory (single GPU); or pass a smaller batch. Validation during training uses up to twice the batch.',
            version
          )
        : trans.__(
            'Ultralytics %1: train with batch=-1 to let AutoBatch pick a batch that fits this GPU (single GPU), or pass a smaller batch. Validation during training uses up to twice the batch.',
            version
          )
    }
  ];
  if (retry) {
    advice.push({
      id: 'ultralytics-retry',
      text: trans.__(
        'This version already halves batch and retries, up to 3 times, when CUDA runs out of memory in the first epoch of single-GPU training; an error that reaches the notebook came later (another epoch, validation) or after those retries.'
      )
    });
  }
  advice.push(
    {
      id: 'ultralytics-nbs',
      text: trans.__(
        'A smaller batch keeps the effective batch: Ultralytics accumulates gradients over round(64 / batch) batches (nbs=64) before each optimizer step.'
      )
    },
    {
      id: 'ultralytics-imgsz',
      text: trans.__(
        'A smaller imgsz (default 640, e.g. imgsz=512) shrinks activation memory roughly with the pixel count.'
      )
    },
    {
      id: 'ultralytics-cache',
      text: trans.__(
        'cache=False is already the default; cache=True or "ram" keeps images in CPU RAM and "disk" on disk, never in VRAM, so it is not the cause here.'
      )
    },
    {
      id: 'ultralytics-workers',
      text: trans.__(
        'workers (default 8) are data-loader processes: fewer workers lower CPU RAM and shared memory, not VRAM.'
      )
    }
  );
  return advice;
}
