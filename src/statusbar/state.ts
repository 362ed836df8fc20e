/**
 * What the status bar gauge shows, as a pure function of a kernel model and
 * the settings (so it is unit-tested without a DOM).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { formatBytes, isCudaDevice, sumBytes } from '../analysis/format';
import type { GpuKernelModel } from '../model';
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

/**
 * Compute the gauge state.
 *
 * Figures: device used/total and this kernel's share come from NVML (v2
 * memory struct, as nvidia-smi); allocated/reserved from PyTorch's caching
 * allocator, only when the kernel already initialised CUDA.
 */
export function gaugeState(
  model: GpuKernelModel,
  settings: IGpuSettings,
  trans: TranslationBundle
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
        tooltip: [trans.__('The kernel died. Restart it to measure again.')]
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

  const inventory = model.inventory;
  const models = inventory?.models ?? [];
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
  const errors = model.agentErrors.map(e =>
    trans.__('Agent error (%1): %2', e.where, e.message)
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
        modelLine,
        trans.__('Model memory in RAM: %1', formatBytes(ram)),
        ...errors
      ]
    };
  }

  const fraction =
    device.total > 0 ? Math.min(1, device.used / device.total) : 0;
  const name =
    model.hello?.devices.find(d => d.index === device.index)?.name ??
    `GPU ${device.index}`;
  const lines = [
    trans.__('%1 (cuda:%2)', name, device.index),
    trans.__(
      'Device used: %1 of %2 (NVML, all processes)',
      formatBytes(device.used),
      formatBytes(device.total)
    ),
    device.process === null
      ? trans.__(
          'This kernel: not listed by NVML (no CUDA context yet, or the kernel’s container hides its pid)'
        )
      : trans.__(
          'This kernel: %1 (NVML, includes the CUDA context)',
          formatBytes(device.process)
        ),
    trans.__(
      'PyTorch reserved: %1 (caching allocator)',
      formatBytes(device.reserved)
    ),
    trans.__(
      'PyTorch allocated: %1 (live tensors)',
      formatBytes(device.allocated)
    ),
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
