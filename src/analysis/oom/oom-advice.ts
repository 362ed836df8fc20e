/**
 * What to try after a CUDA out-of-memory error, built from the agent's `oom`
 * message only (pure functions; the diagnosis is `oom-diagnosis.ts`).
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
import type { IOom } from '../../protocol';
import { formatBytes, formatIdle } from '../format';
import { kernelName } from '../processes/kernel-labels';
import { IOomKernels } from '../processes/oom-idle-kernels';
import { idleCache, isFragmented } from './oom-diagnosis';

/** First Ultralytics version with a fractional `batch` (AutoBatch at that share of GPU memory). */
export const ULTRALYTICS_FRACTION_BATCH = '8.2.29';
/** First Ultralytics version whose trainer halves `batch` and retries after a first-epoch CUDA OOM. */
export const ULTRALYTICS_OOM_RETRY = '8.4.13';
/** First torch version with `expandable_segments` in `PYTORCH_CUDA_ALLOC_CONF`. */
export const TORCH_EXPANDABLE_SEGMENTS = '2.1';
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

/** `idle-kernels`: the user's own idle kernels that held most of the device, with a Shut down action each. */
function idleKernelsAdvice(
  idle: IOomKernels,
  trans: TranslationBundle
): IAdvice {
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
  return {
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
  };
}

/** `clean`: what Clean GPU frees now (stale models, the last traceback); null when nothing. */
function cleanAdvice(oom: IOom, trans: TranslationBundle): IAdvice | null {
  const staleBytes = oom.stale.reduce((sum, m) => sum + m.bytes, 0);
  const freeable = staleBytes + oom.traceback;
  return freeable > 0
    ? {
        id: 'clean',
        text: trans.__(
          'Clean GPU frees %1 now: stale models and the last traceback, without touching your variables.',
          formatBytes(freeable)
        )
      }
    : null;
}

/** `graphs`: variables that keep autograd graphs; null when none. */
function graphsAdvice(oom: IOom, trans: TranslationBundle): IAdvice | null {
  return oom.graphs > 0
    ? {
        id: 'graphs',
        text: trans.__(
          'Variables keep autograd graphs alive (%1): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().',
          formatBytes(oom.graphs)
        )
      }
    : null;
}

/** `processes`: other processes on the device, but the idle kernels already told (`idlePids`); null when none. */
function processesAdvice(
  oom: IOom,
  idlePids: ReadonlySet<number>,
  trans: TranslationBundle
): IAdvice | null {
  const others = oom.processes.filter(
    p => !idlePids.has(p.pid) && (p.used === null || p.used > 0)
  );
  if (!others.length) {
    return null;
  }
  const used = others.reduce((sum, p) => sum + (p.used ?? 0), 0);
  const pids = others
    .slice(0, 3)
    .map(p => String(p.pid))
    .join(', ');
  return {
    id: 'processes',
    text: trans.__(
      'Other processes use %1 of this GPU (pid %2%3): stop them or run on another GPU.',
      formatBytes(used),
      pids,
      others.length > 3 ? ', …' : ''
    )
  };
}

/** `too-large`: a request larger than the whole device; null otherwise. */
function tooLargeAdvice(oom: IOom, trans: TranslationBundle): IAdvice | null {
  return oom.requested !== null &&
    oom.total !== null &&
    oom.requested > oom.total
    ? {
        id: 'too-large',
        text: trans.__(
          'One allocation of %1 is larger than the whole GPU (%2): the batch or the tensor itself must shrink.',
          formatBytes(oom.requested),
          formatBytes(oom.total)
        )
      }
    : null;
}

/** `fragmentation`: {@link isFragmented} → `expandable_segments:True` (or: it needs torch 2.1); null otherwise. */
function fragmentationAdvice(
  oom: IOom,
  trans: TranslationBundle
): IAdvice | null {
  if (!isFragmented(oom)) {
    return null;
  }
  const idle = formatBytes(idleCache(oom));
  return {
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
  };
}

/** Advice without Ultralytics: a smaller batch with gradient accumulation, `torch.no_grad()`, `del` + Clean GPU. */
function plainTorchAdvice(trans: TranslationBundle): IAdvice[] {
  return [
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
  ];
}

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
  const idle = kernels?.mostly ? kernels : null;
  const idlePids = new Set((idle?.kernels ?? []).map(k => k.pid));
  return [
    idle ? idleKernelsAdvice(idle, trans) : null,
    cleanAdvice(oom, trans),
    graphsAdvice(oom, trans),
    processesAdvice(oom, idlePids, trans),
    tooLargeAdvice(oom, trans),
    fragmentationAdvice(oom, trans),
    ...(oom.ultralytics !== null
      ? ultralyticsAdvice(oom.ultralytics, trans)
      : plainTorchAdvice(trans))
  ].filter((a): a is IAdvice => a !== null);
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
