/**
 * What the VRAM panel shows, as pure functions of a kernel model and the
 * settings (unit-tested without a DOM).
 */
import { memoryBands } from '../analysis/memory/bands';
import {
  factsOf,
  findings,
  IFinding,
  splitAtFloor
} from '../analysis/findings';
import {
  cellRows,
  ICellRow,
  nextExecutionCount
} from '../analysis/cells/cell-history';
import type { SeriesRow } from '../analysis/memory/downsample';
import { epochsByCell, ICellEpochs } from '../analysis/cells/epochs';
import { graphRows, IGraphRow } from '../analysis/memory/graph-holders';
import {
  DEFAULT_HOLDER_SORT,
  holderRows,
  IHolderRow,
  IHolderSort,
  IRootsSummary,
  rootsSummary,
  tensorRows
} from '../analysis/memory/holders';
import { projectFull } from '../analysis/memory/projection';
import { ILeakTrend, leakTrend } from '../analysis/memory/leak-trend';
import type { AgentStatus, GpuKernelModel } from '../model';
import type { ISample, ITensorInfo } from '../protocol';
import type { IGpuSettings } from '../tokens';
import {
  epochMarks,
  IEpochMark,
  IProjectionLine,
  projectionLine
} from './chart-marks';

/** The chart's series, in drawing order. */
export const SERIES = [
  'used',
  'process',
  'reserved',
  'allocated',
  'cached',
  'nonTorch',
  'rss',
  'utilization',
  'processUtilization'
] as const;

/**
 * A chart series: device used (NVML), this kernel (NVML), torch reserved and
 * allocated, and two bands of this kernel's memory: PyTorch's cache
 * (reserved − allocated, free for this kernel) and the CUDA context and
 * libraries (process − reserved). Without a GPU, only `rss`: the kernel
 * process's resident RAM (the sample's `ram.rss`, /proc/self/statm).
 * `utilization` and `processUtilization` are percent, not bytes
 * ({@link PERCENT_SERIES}): the device's GPU-Util and this kernel's share of
 * it (NVML), on the chart's second axis.
 */
export type SeriesKey = (typeof SERIES)[number];

/** The series in percent (0-100) rather than bytes. */
export const PERCENT_SERIES: ReadonlySet<SeriesKey> = new Set<SeriesKey>([
  'utilization',
  'processUtilization'
]);

/** One chart row: bytes per series at time `t` (seconds since the epoch). */
export type ChartRow = SeriesRow<SeriesKey>;

/** A cell on the chart: a marker at its start (or end) and its span. */
export interface ICellMarker {
  executionCount: number;
  /** Marker position: the cell's start, or its end when shorter than a sample interval. */
  t: number;
  /** End of the cell. */
  end: number;
}

/** A CUDA device the kernel sees. */
export interface IDeviceChoice {
  index: number;
  name: string;
}

/** Everything the panel renders for one kernel. */
export interface IPanelData {
  /** Agent connection status. */
  status: AgentStatus;
  /** Kernel language when not supported, failure text when failed. */
  detail: string | null;
  /** Whether any CUDA figure is measurable (NVML device or torch allocator). */
  gpu: boolean;
  /** Why there is no GPU figure (NVML error), when `gpu` is false. */
  noGpuReason: string | null;
  /** Devices to choose from (several GPUs: a selector). */
  devices: IDeviceChoice[];
  /** The device shown. */
  device: number;
  /**
   * Chart rows for `device`, oldest first (not downsampled); without a GPU,
   * the kernel's resident RAM ({@link ramRows}).
   */
  rows: ChartRow[];
  /**
   * Device total (bytes) for the dashed line, or null; without a GPU, the
   * RAM the kernel may use (the sample's `ram.total`), or null.
   */
  total: number | null;
  /** Cell markers within the chart's time range (the latest 100). */
  markers: ICellMarker[];
  /** Per-cell rows, oldest first. */
  cells: ICellRow[];
  /** The Ultralytics epochs of each of `cells` (same order; null: the cell trained none). */
  cellEpochs: Array<ICellEpochs | null>;
  /** Who holds VRAM, sorted. */
  holders: IHolderRow[];
  /** Bytes by root on the device shown (all devices without a GPU), or null before an inventory. */
  roots: IRootsSummary | null;
  /** The largest loose tensors on the device shown (all without a GPU). */
  tensors: ITensorInfo[];
  /** Variables that keep autograd graphs alive, largest first. */
  graphs: IGraphRow[];
  /** The kernel's findings at or above the floor, largest first (`findings()`, `splitAtFloor`). */
  findings: IFinding[];
  /** Its findings below the floor (`findingFloorMiB`), largest first: listed on request. */
  smallFindings: IFinding[];
  /** Whether the inventory hit a walk bound (holders may be incomplete). */
  truncated: boolean;
  /** Leak trend of `device` (verdict `no-data` without a GPU). */
  trend: ILeakTrend;
  /**
   * While the running cell's floor climbs on `device`: the chart's line from
   * the floor to where the GPU is full; else null.
   */
  projection: IProjectionLine | null;
  /** Where each epoch of a training the agent follows began, within the chart's range. */
  epochs: IEpochMark[];
  /** The running cell's execution count while a cell runs (the kernel's next), else null. */
  runningCell: number | null;
}

/** Chart rows of one device; a sample without that device gives nulls. */
export function chartRows(
  samples: ReadonlyArray<ISample>,
  device: number
): ChartRow[] {
  return samples.map(sample => {
    const d = sample.devices.find(x => x.index === device);
    const bands = d ? memoryBands(d) : null;
    return {
      t: sample.t,
      used: d?.used ?? null,
      process: d?.process ?? null,
      reserved: d?.reserved ?? null,
      allocated: d?.allocated ?? null,
      cached: bands?.cached ?? null,
      nonTorch: bands?.nonTorch ?? null,
      rss: null,
      utilization: d?.utilization ?? null,
      processUtilization: d?.processUtilization ?? null
    };
  });
}

/**
 * Chart rows of the kernel process's resident RAM (`ram.rss` of each
 * sample, bytes), for a kernel without a GPU: every other series null.
 */
export function ramRows(samples: ReadonlyArray<ISample>): ChartRow[] {
  return samples.map(sample => ({
    t: sample.t,
    used: null,
    process: null,
    reserved: null,
    allocated: null,
    cached: null,
    nonTorch: null,
    rss: sample.ram?.rss ?? null,
    utilization: null,
    processUtilization: null
  }));
}

/**
 * Markers of the cells that ran within `[from, to]`, the latest `max` of them.
 */
export function cellMarkers(
  cells: ReadonlyArray<ICellRow>,
  from: number,
  to: number,
  max = 100
): ICellMarker[] {
  return cells
    .filter(c => c.end >= from && (c.start ?? c.end) <= to)
    .slice(-max)
    .map(c => ({
      executionCount: c.executionCount,
      t: c.start ?? c.end,
      end: c.end
    }));
}

/** Devices seen in the hello and the latest sample, by index. */
export function deviceChoices(model: GpuKernelModel): IDeviceChoice[] {
  const choices = new Map<number, string>();
  for (const d of model.hello?.devices ?? []) {
    choices.set(d.index, d.name);
  }
  for (const d of model.latestSample?.devices ?? []) {
    if (!choices.has(d.index)) {
      choices.set(d.index, `GPU ${d.index}`);
    }
  }
  return [...choices.entries()]
    .sort(([a], [b]) => a - b)
    .map(([index, name]) => ({ index, name }));
}

/**
 * Compute the panel's data.
 *
 * @param device - the device chosen in the selector, or null for the one the
 *   gauge shows (where this kernel uses the most memory).
 */
export function panelData(
  model: GpuKernelModel,
  settings: Pick<
    IGpuSettings,
    'leakMinPoints' | 'leakMinR2' | 'findingFloorMiB'
  >,
  device: number | null,
  sort: IHolderSort = DEFAULT_HOLDER_SORT
): IPanelData {
  const devices = deviceChoices(model);
  const chosen =
    device !== null && devices.some(d => d.index === device)
      ? device
      : (model.primaryDevice()?.index ?? devices[0]?.index ?? 0);
  const samples = model.samples;
  const rows = chartRows(samples, chosen);
  const gpu = rows.some(
    r => r.used !== null || r.allocated !== null || r.reserved !== null
  );
  const latest = model.latestSample?.devices.find(d => d.index === chosen);
  const total =
    latest?.total ??
    model.hello?.devices.find(d => d.index === chosen)?.total ??
    null;
  const cells = cellRows(samples, model.cells, chosen);
  const from = samples.length ? samples[0].t : 0;
  const to = samples.length ? samples[samples.length - 1].t : 0;
  const hello = model.hello;
  const trend = leakTrend(cells, samples, chosen, settings);
  return {
    status: model.status,
    detail:
      model.status === 'unsupported'
        ? model.language
        : model.status === 'failed'
          ? model.failure
          : null,
    gpu,
    noGpuReason: gpu ? null : hello && !hello.nvml ? hello.nvmlError : null,
    devices,
    device: chosen,
    rows: gpu ? rows : ramRows(samples),
    total: gpu ? total : (model.latestSample?.ram?.total ?? null),
    markers: samples.length ? cellMarkers(cells, from, to) : [],
    cells,
    cellEpochs: epochsByCell(samples, cells, chosen),
    holders: holderRows(model.inventory, sort),
    roots: rootsSummary(model.inventory, gpu ? `cuda:${chosen}` : null),
    tensors: tensorRows(model.inventory, gpu ? `cuda:${chosen}` : null),
    graphs: graphRows(model.inventory),
    ...Private.atFloor(findings(factsOf(model)), settings.findingFloorMiB),
    truncated: model.inventory?.truncated ?? false,
    trend,
    projection:
      gpu && trend.basis === 'samples' && trend.executionCount === null
        ? projectionLine(projectFull(trend, samples), { from, to })
        : null,
    epochs: epochMarks(samples, { from, to }),
    runningCell: model.latestSample?.busy
      ? nextExecutionCount(model.cells)
      : null
  };
}

/** Module-private helpers. */
namespace Private {
  /** The panel's `findings` and `smallFindings` (`splitAtFloor`). */
  export function atFloor(
    list: IFinding[],
    floorMiB: number
  ): { findings: IFinding[]; smallFindings: IFinding[] } {
    const { shown, small } = splitAtFloor(list, floorMiB);
    return { findings: shown, smallFindings: small };
  }
}
