/**
 * The leak finding of one kernel: the first CUDA device whose PyTorch
 * allocated memory climbs steadily, cell after cell or inside one long cell
 * ({@link leakTrend} judges one device; this picks the device).
 */
import type { ISample } from '../protocol';
import { cellRows, ICellMark } from './cells';
import { ILeakSettings, ILeakTrend, leakTrend } from './trend';

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
