/**
 * What the status bar gauge shows, as a pure function of a kernel model and
 * the settings (so it is unit-tested without a DOM).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { memoryBands } from '../analysis/bands';
import {
  factsOf,
  findings,
  summarizeFindings,
  userModels
} from '../analysis/findings';
import { formatBytes, isCudaDevice, sumBytes } from '../analysis/format';
import {
  deviceKey,
  IDeviceTotals,
  IGpuProcessesJoin
} from '../analysis/gpuprocesses';
import type { GpuKernelModel } from '../model';
import type { IDeviceSample } from '../protocol';
import type { IGpuSettings } from '../tokens';

/** Colour level of the gauge bar. */
export type GaugeLevel = 'ok' | 'warn' | 'critical' | 'none';

/** Everything the gauge renders. */
export interface IGaugeState {
  /** Short text in the status bar. */
  text: string;
  /** Tooltip lines (the breakdown). */
  tooltip: string[];
  /** Fraction 0–1 of device memory used, or null when there is no bar. */
  fraction: number | null;
  /** Bar colour level. */
  level: GaugeLevel;
  /** Machine-readable state, for styling and tests. */
  kind:
    | 'gpu'
    | 'no-gpu'
    | 'starting'
    | 'restarting'
    | 'dead'
    | 'unsupported'
    | 'failed';
}

/**
 * Colour level of a fraction of device memory.
 *
 * @param fraction - used / total, 0–1.
 */
export function levelOf(
  fraction: number,
  settings: Pick<IGpuSettings, 'warnThreshold' | 'criticalThreshold'>
): GaugeLevel {
  if (fraction >= settings.criticalThreshold) {
    return 'critical';
  }
  if (fraction >= settings.warnThreshold) {
    return 'warn';
  }
  return 'ok';
}

/** Bands of the kernel's memory below which the "not a leak" note is not worth a line. */
const NOTE_MIN_BYTES = 64 * 2 ** 20;

/**
 * Age (seconds, against the latest sample) beyond which the agent's list of
 * the GPU's processes is too old for the tooltip (the agent sends one at
 * least every 10 s while NVML works).
 */
export const GPU_PROCESSES_MAX_AGE_S = 30;

/**
 * The tooltip lines about the rest of a device (NVML's process list joined
 * with this server's kernels): "Your other kernels: 8.0 GiB" and "Other
 * processes: 3.0 GiB (2)"; in a container, where no pid can be joined, one
 * line for all processes. None when there is nothing else on the device.
 *
 * @param server - whether the server's kernel list was available (without
 *   it, the user's kernels cannot be told from other processes).
 */
export function otherProcessLines(
  totals: IDeviceTotals | undefined,
  server: boolean,
  trans: TranslationBundle
): string[] {
  if (!totals) {
    return [];
  }
  const lines: string[] = [];
  if (totals.unattributedCount > 0) {
    lines.push(
      trans.__(
        'Processes on this GPU: %1 (%2), attribution unavailable in this container',
        formatBytes(totals.unattributedBytes),
        totals.unattributedCount
      )
    );
  }
  if (totals.kernelCount > 0) {
    lines.push(
      trans.__('Your other kernels: %1', formatBytes(totals.kernelBytes))
    );
  }
  if (totals.otherCount > 0) {
    lines.push(
      server
        ? trans.__(
            'Other processes: %1 (%2)',
            formatBytes(totals.otherBytes),
            totals.otherCount
          )
        : trans.__(
            'Other processes: %1 (%2); which are kernels of this server: unknown',
            formatBytes(totals.otherBytes),
            totals.otherCount
          )
    );
  }
  return lines;
}

/**
 * The heading of a device: its NVML name and CUDA index, and nvidia-smi's
 * number when CUDA_VISIBLE_DEVICES makes them differ.
 */
function deviceHeading(
  model: GpuKernelModel,
  index: number,
  trans: TranslationBundle
): string {
  const info = model.hello?.devices.find(d => d.index === index);
  const name = info?.name ?? `GPU ${index}`;
  return info && info.nvmlIndex !== index
    ? trans.__('%1 (cuda:%2, nvidia-smi GPU %3)', name, index, info.nvmlIndex)
    : trans.__('%1 (cuda:%2)', name, index);
}

/**
 * Tooltip lines for one device: NVML's device figure, this kernel's share and
 * its bands (in use by tensors, cached by PyTorch, CUDA context and
 * libraries), so that memory which is only cache and context does not read as
 * a leak. The "not a leak" note needs no stale model on the device and more
 * cache and context than live tensors.
 */
function deviceLines(
  device: IDeviceSample,
  heading: string,
  staleBytes: number,
  others: string[],
  trans: TranslationBundle
): string[] {
  const lines = [heading];
  if (device.used !== null && device.total !== null) {
    lines.push(
      trans.__(
        'Device used: %1 of %2 (NVML, all processes)',
        formatBytes(device.used),
        formatBytes(device.total)
      )
    );
  }
  if (device.processHidden) {
    lines.push(
      trans.__(
        'This kernel: NVML does not see this kernel’s process (container pid namespace); the figures below come from torch’s counters'
      )
    );
  } else if (device.process === null) {
    lines.push(
      trans.__(
        'This kernel: not listed by NVML (no CUDA context yet, or the kernel’s container hides its pid)'
      )
    );
  } else {
    lines.push(
      trans.__(
        'This kernel: %1 (NVML, includes the CUDA context)',
        formatBytes(device.process)
      )
    );
  }
  const bands = memoryBands(device);
  if (bands.allocated === null) {
    lines.push(
      trans.__(
        'PyTorch: no allocator figures (torch not imported or CUDA not initialised in this kernel)'
      )
    );
  } else {
    lines.push(
      trans.__(
        'In use by tensors: %1 (PyTorch allocated)',
        formatBytes(bands.allocated)
      )
    );
    if (bands.cached !== null) {
      lines.push(
        trans.__(
          'Cached by PyTorch: %1 — free for this kernel, released by empty_cache()',
          formatBytes(bands.cached)
        )
      );
    }
  }
  if (bands.nonTorch !== null) {
    lines.push(
      trans.__(
        'CUDA context and libraries: %1 — freed only by restarting the kernel',
        formatBytes(bands.nonTorch)
      )
    );
  }
  const idle = (bands.cached ?? 0) + (bands.nonTorch ?? 0);
  if (
    bands.allocated !== null &&
    staleBytes === 0 &&
    idle > bands.allocated &&
    idle >= NOTE_MIN_BYTES
  ) {
    lines.push(
      trans.__(
        'Not a leak: most of this kernel’s VRAM is PyTorch’s reusable cache and the CUDA context, not live tensors.'
      )
    );
  }
  lines.push(...others);
  return lines;
}

/**
 * Compute the gauge state.
 *
 * Figures: device used/total and this kernel's share come from NVML (v2
 * memory struct, as nvidia-smi); allocated and cached from PyTorch's caching
 * allocator, only when the kernel already initialised CUDA; the CUDA context
 * and libraries are NVML's process figure minus torch reserved. The tooltip
 * shows these bands for the gauge's device and for every other device where
 * this kernel holds memory, then, per device, what the user's other kernels
 * and other processes hold there (NVML's process list joined with the
 * server's kernels: `processes`, when the agent sent one lately).
 */
export function gaugeState(
  model: GpuKernelModel,
  settings: IGpuSettings,
  trans: TranslationBundle,
  processes: IGpuProcessesJoin | null = null
): IGaugeState {
  const none = { fraction: null, level: 'none' as GaugeLevel };
  switch (model.status) {
    case 'unsupported':
      return {
        ...none,
        kind: 'unsupported',
        text: trans.__('GPU hygiene: kernel not supported'),
        tooltip: [
          trans.__(
            'The kernel language is %1; GPU hygiene watches Python kernels only. Nothing is sent to this kernel.',
            model.language ?? trans.__('unknown')
          )
        ]
      };
    case 'failed':
      return {
        ...none,
        kind: 'failed',
        text: trans.__('GPU hygiene: agent failed'),
        tooltip: [
          trans.__(
            'The GPU hygiene agent could not start in this kernel: %1',
            model.failure ?? ''
          )
        ]
      };
    case 'dead':
      return {
        ...none,
        kind: 'dead',
        text: trans.__('VRAM: kernel dead'),
        tooltip: [Private.deadLine(model, trans)]
      };
    case 'restarting':
      return {
        ...none,
        kind: 'restarting',
        text: trans.__('VRAM: restarting…'),
        tooltip: [
          trans.__(
            'The kernel is restarting; the agent is sent again when it is ready.'
          )
        ]
      };
    case 'starting':
      return {
        ...none,
        kind: 'starting',
        text: trans.__('VRAM: …'),
        tooltip: [trans.__('Waiting for the kernel’s GPU hygiene agent.')]
      };
    default:
      break;
  }

  // One notion of model: modules nothing reaches and parts are not models.
  const models = userModels(model.inventory);
  const stale = models.filter(m => m.stale).length;
  const modelLine =
    models.length === 0
      ? trans.__('Live models: none')
      : trans._n(
          'Live models: %1 (%2 stale)',
          'Live models: %1 (%2 stale)',
          models.length,
          stale
        );
  const findingLine = Private.findingsLine(model, trans);
  const errors = model.agentErrors.map(e =>
    trans.__('Agent error (%1): %2', e.where, Private.clip(e.message))
  );
  const device = model.primaryDevice();

  if (!device || device.total === null || device.used === null) {
    const ram = models.reduce(
      (sum, m) => sum + sumBytes(m.bytes, d => !isCudaDevice(d)),
      0
    );
    const text =
      models.length === 0
        ? trans.__('No GPU')
        : trans._n(
            'No GPU · %1 model (%2 RAM)',
            'No GPU · %1 models (%2 RAM)',
            models.length,
            formatBytes(ram)
          );
    const hello = model.hello;
    const reason = hello?.nvml
      ? trans.__('NVML found no CUDA device for this kernel.')
      : trans.__(
          'VRAM not measurable: %1',
          hello?.nvmlError ?? trans.__('NVML is not available in the kernel')
        );
    return {
      ...none,
      kind: 'no-gpu',
      text,
      tooltip: [
        reason,
        ...findingLine,
        modelLine,
        trans.__('Model memory in RAM: %1', formatBytes(ram)),
        ...errors
      ]
    };
  }

  const fraction =
    device.total > 0 ? Math.min(1, device.used / device.total) : 0;
  const others = (model.latestSample?.devices ?? []).filter(
    d =>
      d !== device &&
      ((d.process ?? 0) > 0 || (d.reserved ?? 0) > 0 || d.processHidden)
  );
  const latestT = model.latestSample?.t ?? 0;
  const join =
    processes && processes.t >= latestT - GPU_PROCESSES_MAX_AGE_S
      ? processes
      : null;
  const lines = [
    ...[device, ...others].flatMap(d =>
      deviceLines(
        d,
        deviceHeading(model, d.index, trans),
        models
          .filter(m => m.stale)
          .reduce((sum, m) => sum + (m.bytes[`cuda:${d.index}`] ?? 0), 0),
        join
          ? otherProcessLines(
              join.totals[deviceKey(d.index)],
              join.server,
              trans
            )
          : [],
        trans
      )
    ),
    ...findingLine,
    modelLine,
    ...errors
  ];
  return {
    kind: 'gpu',
    text: trans.__(
      'VRAM %1 / %2',
      formatBytes(device.used),
      formatBytes(device.total)
    ),
    tooltip: lines,
    fraction,
    level: levelOf(fraction, settings)
  };
}

/** Module-private helpers. */
namespace Private {
  /**
   * The findings in one line, e.g. "Findings: 2 warnings (36.2 MiB), 1
   * info"; none when there is no finding.
   */
  export function findingsLine(
    model: GpuKernelModel,
    trans: TranslationBundle
  ): string[] {
    const { warnings, warningBytes, infos } = summarizeFindings(
      findings(factsOf(model))
    );
    const parts = [
      ...(warnings
        ? [
            trans._n(
              '%1 warning (%2)',
              '%1 warnings (%2)',
              warnings,
              formatBytes(warningBytes)
            )
          ]
        : []),
      ...(infos ? [trans._n('%1 info', '%1 infos', infos)] : [])
    ];
    return parts.length ? [trans.__('Findings: %1', parts.join(', '))] : [];
  }

  /** Longest agent error message shown in the tooltip (characters). */
  const ERROR_MAX_CHARS = 300;

  /** One line of at most {@link ERROR_MAX_CHARS} characters. */
  export function clip(text: string): string {
    const line = text.replace(/\s+/g, ' ').trim();
    return line.length > ERROR_MAX_CHARS
      ? `${line.slice(0, ERROR_MAX_CHARS - 1)}…`
      : line;
  }

  /** Why the gauge says "kernel dead", and what happens next. */
  export function deadLine(
    model: GpuKernelModel,
    trans: TranslationBundle
  ): string {
    switch (model.deadReason) {
      case 'restarting':
        return trans.__(
          'The kernel process died (its variables are gone); JupyterLab is restarting it and the agent is sent again when it is ready.'
        );
      case 'unresponsive':
        return trans.__(
          'The kernel does not answer: its process was probably killed (from outside, or by the out-of-memory killer). JupyterLab restarts a dead kernel automatically.'
        );
      default:
        return trans.__('The kernel died. Restart it to measure again.');
    }
  }
}
