/**
 * What the status bar gauge shows, as a pure function of a kernel model and
 * the settings (so it is unit-tested without a DOM); the devices' tooltip
 * lines are `tooltip.ts`. The breakdown is structured (`details`: a lead
 * sentence, secondary notes, one section per device, a summary) for the
 * gauge's popup, and flattened into `tooltip` lines.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { loadedFindings } from '../analysis/findings/rules-loader';
import { userModels } from '../analysis/findings/user-models';
import { formatBytes, isCudaDevice, sumBytes } from '../analysis/format';
import type { IGpuProcessesJoin } from '../analysis/processes/gpu-process-types';
import type { GpuKernelModel } from '../model';
import type { ILimit, IModelInfo } from '../protocol';
import { loadedServerDevices } from '../server-devices-loader';
import type { IGpuSettings } from '../tokens';
import { deviceSections, IDeviceSection } from './tooltip';

/** Colour level of the gauge bar. */
export type GaugeLevel = 'ok' | 'warn' | 'critical' | 'none';

/** The gauge's breakdown, as its popup shows it. */
export interface IGaugeDetails {
  /**
   * A plain sentence that comes first (no GPU, kernel dead, restarting…),
   * or null when the devices' figures say it all.
   */
  lead: string | null;
  /** Secondary lines under the lead, shown smaller: the raw reason (NVML's error). */
  notes: string[];
  /** One section per device the gauge tells (NVML's figures, this kernel's bands). */
  devices: IDeviceSection[];
  /** Findings, live models, model memory in RAM. */
  summary: string[];
  /** Agent errors, one line each (at most 300 characters). */
  errors: string[];
  /**
   * What the kernel's environment lacks that the agent degrades from
   * (`GpuKernelModel.limits`), one line each, each once: e.g. "Holders
   * limited: IPython 7.34.0".
   */
  limits: string[];
}

/** Everything the gauge renders. */
export interface IGaugeState {
  /** Short text in the status bar. */
  text: string;
  /** The breakdown's lines, flattened from `details` (lead, notes, devices, summary, errors, limits). */
  tooltip: string[];
  /** The breakdown, structured (the gauge's popup). */
  details: IGaugeDetails;
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
 * Age (seconds, against the latest sample) beyond which the agent's list of
 * the GPU's processes is too old for the tooltip (the agent sends one at
 * least every 10 s while NVML works).
 */
export const GPU_PROCESSES_MAX_AGE_S = 30;

/**
 * The gauge state of a kernel that is not running with its agent
 * (unsupported, failed, dead, restarting, starting); null for a running
 * one.
 */
function statusState(
  model: GpuKernelModel,
  trans: TranslationBundle
): IGaugeState | null {
  const none = { fraction: null, level: 'none' as GaugeLevel };
  const lead = (line: string) => ({
    tooltip: [line],
    details: Private.details({ lead: line })
  });
  switch (model.status) {
    case 'unsupported':
      return {
        ...none,
        kind: 'unsupported',
        text: trans.__('GPU hygiene: kernel not supported'),
        ...lead(
          trans.__(
            'The kernel language is %1; GPU hygiene watches Python kernels only. Nothing is sent to this kernel.',
            model.language ?? trans.__('unknown')
          )
        )
      };
    case 'failed':
      return {
        ...none,
        kind: 'failed',
        text: trans.__('GPU hygiene: agent failed'),
        ...lead(
          trans.__(
            'The GPU hygiene agent could not start in this kernel: %1',
            model.failure ?? ''
          )
        )
      };
    case 'dead':
      return {
        ...none,
        kind: 'dead',
        text: trans.__('VRAM: kernel dead'),
        ...lead(Private.deadLine(model, trans))
      };
    case 'restarting':
      return {
        ...none,
        kind: 'restarting',
        text: trans.__('VRAM: restarting…'),
        ...lead(
          trans.__(
            'The kernel is restarting; the agent is sent again when it is ready.'
          )
        )
      };
    case 'starting':
      return {
        ...none,
        kind: 'starting',
        text: trans.__('VRAM: …'),
        ...lead(trans.__('Waiting for the kernel’s GPU hygiene agent.'))
      };
    default:
      return null;
  }
}

/** The tooltip's lines after the devices: findings, live models, agent errors, limits. */
interface ISummaryLines {
  findings: string[];
  models: string;
  errors: string[];
  limits: string[];
}

/**
 * The line that says one limit of the kernel's environment (an area
 * unknown to this browser: none; the schema admits only the known ones).
 */
export function limitLine(limit: ILimit, trans: TranslationBundle): string {
  switch (limit.area) {
    case 'holders':
      return trans.__('Holders limited: %1 %2', limit.library, limit.version);
    case 'models':
      return trans.__(
        'Models found by a heap scan: %1 %2',
        limit.library,
        limit.version
      );
    case 'owners':
      return trans.__(
        'Trainer owners limited: %1 %2',
        limit.library,
        limit.version
      );
    case 'provenance':
      return trans.__(
        'No allocation origins: %1 %2 did not record allocation stacks',
        limit.library,
        limit.version
      );
  }
}

/**
 * The line that says how the agent reads a namespace of more than 2,000
 * names (`inventory.namespace`, agent 0.11.0): names the cells do not
 * mention are read again in turn, every one within `cycle` cells.
 */
export function namespaceLine(
  namespace: { names: number; read: number; cycle: number },
  trans: TranslationBundle
): string {
  return trans.__(
    'Large namespace: %1 names, %2 read after the last cell; a name the cells do not mention is read again within %3 cells',
    namespace.names.toLocaleString(),
    namespace.read.toLocaleString(),
    namespace.cycle.toLocaleString()
  );
}

/**
 * The summary lines of a running kernel whose models are `models`; the
 * findings counted are those the panel lists (at or above `floorMiB`).
 */
function summaryLines(
  model: GpuKernelModel,
  models: ReadonlyArray<IModelInfo>,
  floorMiB: number,
  trans: TranslationBundle
): ISummaryLines {
  const stale = models.filter(m => m.stale).length;
  return {
    findings: Private.findingsLine(model, floorMiB, trans),
    models:
      models.length === 0
        ? trans.__('Live models: none')
        : trans._n(
            'Live models: %1 (%2 stale)',
            'Live models: %1 (%2 stale)',
            models.length,
            stale
          ),
    errors: model.agentErrors.map(e =>
      trans.__('Agent error (%1): %2', e.where, Private.clip(e.message))
    ),
    limits: [
      ...new Set(model.limits.map(l => limitLine(l, trans))),
      ...(model.inventory?.namespace
        ? [namespaceLine(model.inventory.namespace, trans)]
        : [])
    ]
  };
}

/** The gauge state of a running kernel without a measurable CUDA device: its models' RAM and why. */
function noGpuState(
  model: GpuKernelModel,
  models: ReadonlyArray<IModelInfo>,
  summary: ISummaryLines,
  trans: TranslationBundle
): IGaugeState {
  const ram = models.reduce(
    (sum, m) => sum + sumBytes(m.bytes, d => !isCudaDevice(d)),
    0
  );
  // agent 0.12.0: the kernel process's resident memory, the figure
  // jupyter-resource-usage shows, rather than what its models alone hold
  // (17.7 MiB of weights in a kernel of 3.7 GiB; issue 29): the models'
  // RAM is in the details
  const rss = model.latestSample?.ram?.rss ?? null;
  const text =
    rss !== null
      ? models.length === 0
        ? trans.__('No GPU · %1 RAM', formatBytes(rss))
        : trans._n(
            'No GPU · %1 model · %2 RAM',
            'No GPU · %1 models · %2 RAM',
            models.length,
            formatBytes(rss)
          )
      : models.length === 0
        ? trans.__('No GPU')
        : trans._n(
            'No GPU · %1 model (%2 RAM)',
            'No GPU · %1 models (%2 RAM)',
            models.length,
            formatBytes(ram)
          );
  const hello = model.hello;
  // A CUDA device the agent saw, without NVML's figures: there is a GPU,
  // only its memory cannot be read.
  const seen =
    (hello?.devices.length ?? 0) > 0 ||
    (model.latestSample?.devices.length ?? 0) > 0;
  const lead = seen
    ? trans.__('This kernel’s GPU memory cannot be measured')
    : trans.__('No NVIDIA GPU visible to this kernel');
  const reason = hello?.nvml
    ? trans.__('NVML found no CUDA device for this kernel.')
    : trans.__(
        'VRAM not measurable: %1',
        hello?.nvmlError ?? trans.__('NVML is not available in the kernel')
      );
  const process = model.latestSample?.ram;
  const details = Private.details({
    lead,
    notes: [reason],
    summary: [
      ...summary.findings,
      summary.models,
      trans.__('Model memory in RAM: %1', formatBytes(ram)),
      ...(process?.rss !== null && process?.rss !== undefined
        ? [
            process.total
              ? trans.__(
                  'This kernel’s process: %1 resident, of %2 it may use (RAM)',
                  formatBytes(process.rss),
                  formatBytes(process.total)
                )
              : trans.__(
                  'This kernel’s process: %1 resident (RAM)',
                  formatBytes(process.rss)
                )
          ]
        : [])
    ],
    errors: summary.errors,
    limits: summary.limits
  });
  return {
    fraction: null,
    level: 'none',
    kind: 'no-gpu',
    text,
    tooltip: Private.flatten(details),
    details
  };
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
  processes: IGpuProcessesJoin | null = null,
  now: number = Date.now()
): IGaugeState {
  const status = statusState(model, trans);
  if (status) {
    return status;
  }
  // One notion of model: modules nothing reaches and parts are not models.
  const models = userModels(model.inventory);
  const summary = summaryLines(model, models, settings.findingFloorMiB, trans);
  const device = model.primaryDevice();
  if (!device || device.total === null || device.used === null) {
    return noGpuState(model, models, summary, trans);
  }
  const fraction =
    device.total > 0 ? Math.min(1, device.used / device.total) : 0;
  const latestT = model.latestSample?.t ?? 0;
  const join =
    processes && processes.t >= latestT - GPU_PROCESSES_MAX_AGE_S
      ? processes
      : null;
  const details = Private.details({
    notes: loadedServerDevices()?.ageNotes(model, now, trans) ?? [],
    devices: deviceSections(model, device, models, join, trans),
    summary: [...summary.findings, summary.models],
    errors: summary.errors,
    limits: summary.limits
  });
  return {
    kind: 'gpu',
    text: trans.__(
      'VRAM %1 / %2',
      formatBytes(device.used),
      formatBytes(device.total)
    ),
    tooltip: Private.flatten(details),
    details,
    fraction,
    level: levelOf(fraction, settings)
  };
}

/** Module-private helpers. */
namespace Private {
  /** Details with the parts not given empty. */
  export function details(parts: Partial<IGaugeDetails>): IGaugeDetails {
    return {
      lead: null,
      notes: [],
      devices: [],
      summary: [],
      errors: [],
      limits: [],
      ...parts
    };
  }

  /** The breakdown as lines: lead, notes, each device's heading and lines, summary, errors, limits. */
  export function flatten(details: IGaugeDetails): string[] {
    return [
      ...(details.lead === null ? [] : [details.lead]),
      ...details.notes,
      ...details.devices.flatMap(d => [d.heading, ...d.lines]),
      ...details.summary,
      ...details.errors,
      ...details.limits
    ];
  }
  /**
   * The findings in one line, e.g. "Findings: 2 warnings (36.2 MiB), 1
   * info"; none when there is no finding, or while the rules' chunk has
   * not loaded yet (the gauge asks for it with its first kernel, before
   * that kernel's agent can have said anything, and renders again when it
   * is there: `GaugeModel`).
   */
  export function findingsLine(
    model: GpuKernelModel,
    floorMiB: number,
    trans: TranslationBundle
  ): string[] {
    const rules = loadedFindings();
    if (!rules) {
      return [];
    }
    const { warnings, warningBytes, infos } = rules.summarizeFindings(
      rules.splitAtFloor(rules.findings(rules.factsOf(model)), floorMiB).shown
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
      case 'exited':
        return trans.__(
          'The server reports that the kernel process has exited: it was probably killed (from outside, or by the out-of-memory killer). JupyterLab restarts a dead kernel automatically.'
        );
      default:
        return trans.__('The kernel died. Restart it to measure again.');
    }
  }
}
