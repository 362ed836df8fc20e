/**
 * The leak trend as one sentence under the chart: the verdict of `leakTrend`
 * (src/analysis/memory/leak-trend.ts) on PyTorch's allocated memory, per cell
 * or inside a long cell. Pure: renders its props.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes } from '../analysis/format';
import type { ILeakTrend } from '../analysis/memory/leak-trend';

function cellLabel(count: number | null): string {
  return count === null ? '[*]' : `[${count}]`;
}

/**
 * The leak trend, one sentence: rising (with the rate per cell or per
 * minute and R²), flat, too few cells, no CUDA allocator figures yet, or no
 * GPU. Renders `div.jp-GpuHygiene-trend` with a level class
 * (`-warn`, `-ok`, `-info`), `data-verdict` (the verdict, or `"no-gpu"`) and
 * `role="status"`.
 */
export function TrendSummary(props: {
  /** The verdict of `leakTrend`. */
  trend: ILeakTrend;
  /** Whether the kernel sees a GPU; without one the trend is not measured. */
  gpu: boolean;
  /** Cells recorded so far (for "n of m cells measured"). */
  cells: number;
  /** Cells needed for a verdict (the `leakMinPoints` setting). */
  minPoints: number;
  /** The running cell's execution count (the kernel's next), for a climb inside it; null: `[*]`. */
  runningCell?: number | null;
  /** Translations. */
  trans: TranslationBundle;
}): JSX.Element {
  const { trend, gpu, cells, minPoints, trans } = props;
  let text: string;
  let level = 'info';
  if (!gpu) {
    text = trans.__(
      'Leak trend: needs a GPU (it follows PyTorch’s allocated memory on a CUDA device).'
    );
  } else if (trend.verdict === 'rising') {
    level = 'warn';
    text =
      trend.basis === 'cells'
        ? trans.__(
            'Leak trend: allocated climbs ~%1 per cell over %2 cells (R² %3). Something keeps tensors alive across cells, e.g. losses.append(loss) instead of loss.item().',
            formatBytes(trend.rate),
            trend.points,
            trend.r2.toFixed(2)
          )
        : trans.__(
            'Leak trend: allocated climbs ~%1 per minute inside cell %2 (%3 samples, R² %4). Something keeps tensors alive from step to step, e.g. losses.append(loss) instead of loss.item().',
            formatBytes(trend.rate),
            cellLabel(trend.executionCount ?? props.runningCell ?? null),
            trend.points,
            trend.r2.toFixed(2)
          );
  } else if (trend.verdict === 'no-data') {
    text = trans.__(
      'Leak trend: waiting for PyTorch to use CUDA in this kernel (allocated memory is not measurable before).'
    );
  } else if (trend.verdict === 'too-few') {
    text = trans.__(
      'Leak trend: %1 of %2 cells measured; run more cells for a verdict.',
      Math.min(cells, trend.points),
      minPoints
    );
  } else {
    level = 'ok';
    text = trans.__(
      'Leak trend: no steady rise of allocated memory over the last %1 cells.',
      trend.points
    );
  }
  return (
    <div
      className={`jp-GpuHygiene-trend jp-GpuHygiene-trend-${level}`}
      data-verdict={gpu ? trend.verdict : 'no-gpu'}
      role="status"
    >
      {text}
    </div>
  );
}
