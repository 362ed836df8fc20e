/**
 * Leak trend: does PyTorch's allocated memory climb steadily, cell after cell
 * (or minute after minute inside one long cell)? The classic cause is a
 * training loop that keeps autograd graphs alive (`losses.append(loss)`
 * instead of `loss.item()`).
 *
 * A verdict needs a least-squares line with a positive slope that fits well
 * (R²) over enough points, and three shape checks so that what is not a leak
 * is not flagged:
 * - a single step up (a model load) — no one increment may carry half of the rise;
 * - a curve that levels off — the last third must still be climbing;
 * - a sawtooth that returns to its baseline (training steps, epochs) — the
 *   rise must reach a level not seen before it started. Inside a cell the
 *   fit runs on the floor of the samples (the minimum of each few samples),
 *   which a sawtooth does not lift and a leak does.
 */
import type { ISample } from '../protocol';
import { allocatedOf, ICellRow } from './cells';

const MiB = 2 ** 20;

/** A least-squares line `y = slope * x + intercept` and its R². */
export interface ILinearFit {
  slope: number;
  intercept: number;
  /** Coefficient of determination, 0–1 (0 for a constant series). */
  r2: number;
}

/**
 * Least-squares line through points.
 *
 * @param xs - abscissae (same length as `ys`, at least 2 distinct values).
 * @param ys - ordinates.
 */
export function fitLine(
  xs: ReadonlyArray<number>,
  ys: ReadonlyArray<number>
): ILinearFit {
  const n = ys.length;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < n; i++) {
    sx += xs[i];
    sy += ys[i];
  }
  const mx = sx / n;
  const my = sy / n;
  let sxx = 0;
  let sxy = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    const dx = xs[i] - mx;
    const dy = ys[i] - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  if (sxx === 0) {
    return { slope: 0, intercept: my, r2: 0 };
  }
  const slope = sxy / sxx;
  const r2 = syy === 0 ? 0 : Math.min(1, (sxy * sxy) / (sxx * syy));
  return { slope, intercept: my - slope * mx, r2 };
}

/** Verdict of {@link detectSteadyRise}. */
export type TrendVerdict =
  | 'rising' // a steady climb: flag it
  | 'steady' // enough points, no steady climb
  | 'too-few' // fewer points than `minPoints`
  | 'no-data'; // the latest value is not measurable (no GPU, CUDA not initialised)

/** Result of {@link detectSteadyRise}. */
export interface ITrend {
  verdict: TrendVerdict;
  /** Slope of the fit, value units per x unit (bytes per cell, bytes per second). */
  slope: number;
  /** R² of the fit. */
  r2: number;
  /** Points in the fit: the rising stretch for `rising`, else the window. */
  points: number;
}

/** Thresholds of {@link detectSteadyRise}. */
export interface ITrendOptions {
  /** Fewest points for a verdict (≥ 3). */
  minPoints: number;
  /** Lowest R² that counts as a steady climb (0–1). */
  minR2: number;
  /** Smallest slope that counts, value units per x unit (e.g. bytes per cell). */
  minSlope: number;
  /** Most recent points considered (default 50). */
  maxPoints?: number;
}

function mean(values: ReadonlyArray<number>, from: number, to: number): number {
  let sum = 0;
  for (let i = from; i < to; i++) {
    sum += values[i];
  }
  return sum / Math.max(1, to - from);
}

/** Whether the stretch `ys[from..]` is a steady climb; the fit when it is. */
function risingStretch(
  xs: ReadonlyArray<number>,
  ys: ReadonlyArray<number>,
  from: number,
  options: ITrendOptions
): ILinearFit | null {
  const x = xs.slice(from);
  const y = ys.slice(from);
  const n = y.length;
  const fit = fitLine(x, y);
  if (fit.slope < options.minSlope || fit.r2 < options.minR2) {
    return null;
  }
  let low = y[0];
  let high = y[0];
  let biggestStep = 0;
  for (let i = 1; i < n; i++) {
    low = Math.min(low, y[i]);
    high = Math.max(high, y[i]);
    biggestStep = Math.max(biggestStep, y[i] - y[i - 1]);
  }
  const rise = high - low;
  // A single step up (a model load) is not a steady climb.
  if (rise <= 0 || biggestStep > 0.5 * rise) {
    return null;
  }
  // Still climbing at the end: the last third above the middle third by at
  // least half of what the line predicts.
  const third = Math.max(1, Math.floor(n / 3));
  const middle = mean(y, third, n - third);
  const last = mean(y, n - third, n);
  const expected =
    fit.slope * (mean(x, n - third, n) - mean(x, third, n - third));
  if (last - middle < 0.5 * expected) {
    return null;
  }
  // A new level: the climb must leave the range the series moved in before
  // it started (a sawtooth climbs back to where it has been; noise stays
  // within its own range).
  if (from > 0) {
    let beforeLow = ys[0];
    let beforeHigh = ys[0];
    for (let i = 1; i < from; i++) {
      beforeLow = Math.min(beforeLow, ys[i]);
      beforeHigh = Math.max(beforeHigh, ys[i]);
    }
    const climbed = last - mean(y, 0, third);
    if (last <= beforeHigh || climbed <= beforeHigh - beforeLow) {
      return null;
    }
  }
  return fit;
}

/**
 * Look for a steady climb at the end of a series.
 *
 * Only the trailing run of non-null values counts (a null breaks the series:
 * a kernel restart, CUDA not initialised yet). Stretches ending at the latest
 * point are tried from the longest to the shortest of `minPoints`; the first
 * that passes gives the verdict, so "over N cells" names the whole climb.
 *
 * @param values - the series, oldest first (bytes; null = not measurable).
 * @param options - thresholds.
 * @param xs - abscissae (default 0, 1, 2, … — one per cell).
 */
export function detectSteadyRise(
  values: ReadonlyArray<number | null>,
  options: ITrendOptions,
  xs?: ReadonlyArray<number>
): ITrend {
  const minPoints = Math.max(3, Math.floor(options.minPoints));
  const maxPoints = Math.max(minPoints, options.maxPoints ?? 50);
  let from = values.length;
  while (
    from > 0 &&
    values[from - 1] !== null &&
    values.length - from < maxPoints
  ) {
    from--;
  }
  const ys = values.slice(from) as number[];
  const x = xs ? xs.slice(from) : ys.map((_, i) => i);
  if (!ys.length) {
    return {
      verdict: values.length ? 'no-data' : 'too-few',
      slope: 0,
      r2: 0,
      points: 0
    };
  }
  if (ys.length < minPoints) {
    return { verdict: 'too-few', slope: 0, r2: 0, points: ys.length };
  }
  const n = ys.length;
  for (let length = n; length >= minPoints;) {
    let from = n - length;
    let fit = risingStretch(x, ys, from, { ...options, minPoints });
    if (fit) {
      // Leave out a flat head (cells before the climb started).
      while (
        n - from > minPoints &&
        ys[from + 1] - ys[from] < 0.25 * fit.slope * (x[from + 1] - x[from])
      ) {
        const trimmed = risingStretch(x, ys, from + 1, {
          ...options,
          minPoints
        });
        if (!trimmed) {
          break;
        }
        from++;
        fit = trimmed;
      }
      return {
        verdict: 'rising',
        slope: fit.slope,
        r2: fit.r2,
        points: n - from
      };
    }
    length = length > 64 ? Math.floor(length * 0.8) : length - 1;
  }
  const whole = fitLine(x, ys);
  return { verdict: 'steady', slope: whole.slope, r2: whole.r2, points: n };
}

/**
 * The floor of a noisy series: the minimum of each run of `size` points, at
 * the time of its last point. A training loop's sawtooth (activations
 * allocated and freed every step) does not lift it; tensors kept alive do.
 */
export function floorSeries(
  times: ReadonlyArray<number>,
  values: ReadonlyArray<number>,
  size: number
): { xs: number[]; ys: number[] } {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let from = 0; from + size <= values.length; from += size) {
    let min = values[from];
    for (let i = from + 1; i < from + size; i++) {
      min = Math.min(min, values[i]);
    }
    xs.push(times[from + size - 1]);
    ys.push(min);
  }
  return { xs, ys };
}

/** Settings of the leak trend (schema/plugin.json). */
export interface ILeakSettings {
  /** Fewest cells for a verdict. */
  leakMinPoints: number;
  /** Lowest R² of the fit. */
  leakMinR2: number;
}

/** The leak verdict for one device. */
export interface ILeakTrend extends ITrend {
  /** What the points are: allocated after each cell, or the floor of the samples of one long cell. */
  basis: 'cells' | 'samples';
  /** CUDA device index. */
  device: number;
  /** `slope` in bytes per cell (`cells`) or bytes per minute (`samples`). */
  rate: number;
  /** For `samples`: the cell (null while it is still running). */
  executionCount: number | null;
}

/** Smallest climb that counts: 1 MiB per cell, or 1 MiB per minute inside a cell. */
export const MIN_RISE_PER_CELL = MiB;
export const MIN_RISE_PER_MINUTE = MiB;
/** Samples per floor point inside a long cell, and the fewest floor points. */
export const FLOOR_SIZE = 5;
export const MIN_FLOOR_POINTS = 6;

/**
 * Leak trend of one device: first over the allocated value after each cell;
 * when that gives no verdict, over the samples of the latest long cell (the
 * one running now, else the last one), so a climb inside one training cell is
 * seen too.
 *
 * @param rows - per-cell rows for `device` ({@link cellRows}), oldest first.
 * @param samples - the model's samples, in time order.
 * @param device - CUDA device index.
 * @param settings - minimum points and R².
 */
export function leakTrend(
  rows: ReadonlyArray<ICellRow>,
  samples: ReadonlyArray<ISample>,
  device: number,
  settings: ILeakSettings
): ILeakTrend {
  const options = {
    minPoints: settings.leakMinPoints,
    minR2: settings.leakMinR2
  };
  const cells = detectSteadyRise(
    rows.map(r => r.after),
    { ...options, minSlope: MIN_RISE_PER_CELL }
  );
  const byCells: ILeakTrend = {
    ...cells,
    basis: 'cells',
    device,
    rate: cells.slope,
    executionCount: null
  };
  if (cells.verdict === 'rising') {
    return byCells;
  }
  // The latest long cell: the busy samples at the end (running), or those of the last row.
  let end = samples.length;
  let executionCount: number | null = null;
  if (!samples.length || !samples[samples.length - 1].busy) {
    const last = rows[rows.length - 1];
    if (!last || last.start === null) {
      return byCells;
    }
    executionCount = last.executionCount;
    while (
      end > 0 &&
      (samples[end - 1].t > last.end || !samples[end - 1].busy)
    ) {
      end--;
    }
  }
  let begin = end;
  while (begin > 0 && samples[begin - 1].busy) {
    begin--;
  }
  const times: number[] = [];
  const values: number[] = [];
  for (let i = begin; i < end; i++) {
    const value = allocatedOf(samples[i], device);
    if (value === null) {
      times.length = 0;
      values.length = 0;
      continue;
    }
    times.push(samples[i].t);
    values.push(value);
  }
  const floor = floorSeries(times, values, FLOOR_SIZE);
  if (floor.ys.length < Math.max(MIN_FLOOR_POINTS, options.minPoints)) {
    return byCells;
  }
  const inside = detectSteadyRise(
    floor.ys,
    {
      ...options,
      minPoints: Math.max(MIN_FLOOR_POINTS, options.minPoints),
      minSlope: MIN_RISE_PER_MINUTE / 60,
      maxPoints: 1000
    },
    floor.xs
  );
  if (inside.verdict !== 'rising') {
    return byCells;
  }
  return {
    ...inside,
    points: inside.points * FLOOR_SIZE,
    basis: 'samples',
    device,
    rate: inside.slope * 60,
    executionCount
  };
}
