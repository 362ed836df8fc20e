/**
 * The leak finding of one kernel: the first CUDA device whose PyTorch
 * allocated memory climbs steadily, cell after cell or inside one long cell
 * ({@link leakTrend} judges one device; this picks the device).
 */
import type { ISample } from '../../protocol';
import type { IFinding } from '../findings/types';
import { cellRows, ICellMark } from '../cells/cell-history';
import { ILeakSettings, ILeakTrend, leakTrend } from './leak-trend';

/**
 * What the leak finding reads from a kernel model (`GpuKernelModel` has it):
 * the samples in time order, the inventory records in time order and the
 * latest sample (its devices are the ones looked at).
 */
export interface ILeakFacts {
  /** Samples, oldest first. */
  readonly samples: ReadonlyArray<ISample>;
  /** Inventory records (one per cell), oldest first. */
  readonly cells: ReadonlyArray<ICellMark>;
  /** The newest sample, or null before the first one. */
  readonly latestSample: ISample | null;
}

/**
 * The leak trend of a kernel: the first device of the latest sample, in the
 * agent's order, whose allocated memory climbs steadily (verdict `rising`).
 * Devices without a PyTorch figure (allocated `null`: torch not loaded or
 * CUDA not initialised) are skipped.
 *
 * @param facts - the kernel model's samples and cells.
 * @param settings - fewest points and lowest R² (schema/plugin.json).
 * @returns the rising trend, or null when no device climbs.
 */
export function findLeak(
  facts: ILeakFacts,
  settings: ILeakSettings
): ILeakTrend | null {
  const samples = facts.samples;
  for (const device of facts.latestSample?.devices ?? []) {
    if (device.allocated === null) {
      continue;
    }
    const rows = cellRows(samples, facts.cells, device.index);
    const trend = leakTrend(rows, samples, device.index, settings);
    if (trend.verdict === 'rising') {
      return trend;
    }
  }
  return null;
}

/** The finding kinds that name a holder of growing tensors. */
const HOLDING_KINDS: ReadonlyArray<IFinding['kind']> = [
  'output-tensors',
  'graph-holder',
  'cuda-tensors',
  'traceback-tensors',
  'kept-error',
  'optimizer'
];

/**
 * What the inventory already knows holds a climb: the largest finding of a
 * kind that keeps tensors (the output cache, a graph holder, a variable's
 * CUDA tensors, the last traceback, a kept error, an optimizer) on the climbing device, or null (then
 * the toast keeps its general hint).
 *
 * - Across cells: one holding at least one cell's growth (`trend.rate`
 *   bytes), from the latest inventory.
 * - Inside one cell: only once that cell has ended and its own inventory
 *   has come (`inventoryCell` is the trend's `executionCount`; while the cell
 *   runs the inventory is the previous cell's), one holding at least half of
 *   what the floor climbed in the cell (`slope` × the climb's seconds): the
 *   list that kept a validation's losses with their graphs, say.
 *
 * @param trend - a rising trend from {@link findLeak}.
 * @param findings - the kernel's findings, largest first.
 * @param inventoryCell - the execution count of the inventory the findings
 *   come from (`inventory.executionCount`), for a climb inside a cell.
 */
export function leakHolder(
  trend: ILeakTrend,
  findings: ReadonlyArray<IFinding>,
  inventoryCell: number | null = null
): IFinding | null {
  let least: number;
  if (trend.basis === 'cells') {
    least = trend.rate;
  } else {
    if (
      trend.executionCount === null ||
      inventoryCell !== trend.executionCount ||
      !trend.floor ||
      trend.since === null
    ) {
      return null;
    }
    least = 0.5 * trend.slope * Math.max(0, trend.floor.t - trend.since);
  }
  const device = `cuda:${trend.device}`;
  let best: IFinding | null = null;
  for (const finding of findings) {
    const bytes = finding.bytes[device] ?? 0;
    if (!HOLDING_KINDS.includes(finding.kind) || bytes <= 0 || bytes < least) {
      continue;
    }
    if (!best || bytes > (best.bytes[device] ?? 0)) {
      best = finding;
    }
  }
  return best;
}
