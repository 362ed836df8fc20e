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
 *   rise must reach a level not seen before it started.
 *
 * Inside a running cell the points are the floor under the training loop's
 * sawtooth, in windows of a second ({@link cellClimb}, `floor.ts`), which a
 * sawtooth does not lift and a leak does; a climb there must also last
 * {@link MIN_CLIMB_S}, still climb over its last seconds and rise well above
 * the floor's own noise, or be stairs (`detectStairs`).
 */
import type { ISample } from '../../protocol';
import type { ICellRow } from '../cells/cell-history';

const MiB = 2 ** 20;

import { fitLine, ILinearFit } from './fit';
import {
  detectStairs,
  erodeFloor,
  floorSamples,
  floorWindows,
  median,
  MIN_STAIR_STEP
} from './floor';

export { fitLine };
export type { ILinearFit };

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
  /** Intercept of the fit (value at x = 0); 0 without a fit. */
  intercept: number;
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
  /** Shortest stretch that counts, in x units (default 0: any). */
  minSpan?: number;
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
      points: 0,
      intercept: 0
    };
  }
  if (ys.length < minPoints) {
    return {
      verdict: 'too-few',
      slope: 0,
      r2: 0,
      points: ys.length,
      intercept: 0
    };
  }
  const n = ys.length;
  const minSpan = options.minSpan ?? 0;
  const spans = (from: number) => x[n - 1] - x[from] >= minSpan;
  for (let length = n; length >= minPoints;) {
    let from = n - length;
    if (!spans(from)) {
      break; // shorter stretches span less
    }
    let fit = risingStretch(x, ys, from, { ...options, minPoints });
    if (fit) {
      // Leave out a flat head (cells before the climb started).
      while (
        n - from > minPoints &&
        spans(from + 1) &&
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
        points: n - from,
        intercept: fit.intercept
      };
    }
    length = length > 64 ? Math.floor(length * 0.8) : length - 1;
  }
  const whole = fitLine(x, ys);
  return {
    verdict: 'steady',
    slope: whole.slope,
    r2: whole.r2,
    points: n,
    intercept: whole.intercept
  };
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
  /**
   * For a `samples` climb: `ramp` (the floor rises step after step, e.g.
   * `losses.append(loss)` in the training loop) or `stairs` (it steps up once
   * an interval, e.g. a validation's losses kept every epoch); else null.
   */
  shape: 'ramp' | 'stairs' | null;
  /** For a `samples` climb: when the fitted climb began (s since the epoch); else null. */
  since: number | null;
  /**
   * For a `samples` climb: the floor where the climb is now, the fitted
   * line's value (ramp) or the latest level (stairs) at the latest floor
   * window's time (bytes, s since the epoch); the projection starts there.
   */
  floor: { t: number; bytes: number } | null;
  /** For `stairs`: seconds between steps (one epoch); else null. */
  interval: number | null;
  /** For `samples`: when the cell's first busy sample was taken (s since the epoch); else null. */
  cellStart: number | null;
}

/**
 * Smallest climb that counts: 1 MiB per cell, or 32 MiB per minute inside a
 * cell (below that a GPU fills in days, and a floor read from samples
 * wanders by a few MiB).
 */
export const MIN_RISE_PER_CELL = MiB;
export const MIN_RISE_PER_MINUTE = 32 * MiB;
/** Fewest floor windows inside a long cell. */
export const MIN_FLOOR_POINTS = 6;
/**
 * Shortest climb inside a cell (s): a warm-up that rises for its first
 * seconds (optimizer state, cuDNN workspaces, AMP) and then stays flat is
 * not a leak; over 7.5 s the flat part of a 4 s warm-up shows (the last
 * third and the last {@link RECENT_S} seconds must still climb). 7 s let
 * such a warm-up toast in the synthetic tests; 7.5 s toasts a ramp that
 * began 0.5 s into the cell 10 s in.
 */
export const MIN_CLIMB_S = 7.5;
/**
 * Shortest climb inside a cell when the samples carry no `allocatedMin`
 * (agents before 0.6.0): their floor windows are a few random phases of the
 * sawtooth, noisy enough to need twice the time; stairs are not looked for.
 */
export const MIN_CLIMB_S_WITHOUT_READS = 16;
/** Fewest floor windows without `allocatedMin` (each is only a few samples). */
export const MIN_FLOOR_POINTS_WITHOUT_READS = 8;

/** How many times the floor's noise a climb inside a cell must rise at least. */
export const MIN_RISE_OVER_NOISE = 6;

/** The recent stretch of a climb that must still climb (s). */
export const RECENT_S = 4;

/** What a climb inside a cell adds to a trend. */
type CellClimb = Pick<
  ILeakTrend,
  | 'verdict'
  | 'slope'
  | 'r2'
  | 'points'
  | 'intercept'
  | 'shape'
  | 'since'
  | 'floor'
  | 'interval'
>;

/**
 * Is the floor of one cell's samples climbing? Floor windows in time
 * ({@link floorWindows}, their one-sided noise eroded), then two shapes: a
 * steady line ({@link detectSteadyRise}, with its guards against one step,
 * a curve that levels off and a sawtooth back to where it has been)
 * spanning at least {@link MIN_CLIMB_S}, still climbing over its last
 * {@link RECENT_S} seconds and rising {@link MIN_RISE_OVER_NOISE} times
 * the floor's noise; else stairs ({@link detectStairs}, only from samples
 * with `allocatedMin`).
 *
 * @param samples - the busy samples of one cell, in time order.
 * @param device - CUDA device index.
 * @param settings - minimum points and R².
 * @returns the climb (slope in bytes per second), or null.
 */
export function cellClimb(
  samples: ReadonlyArray<ISample>,
  device: number,
  settings: ILeakSettings
): CellClimb | null {
  const run = floorSamples(samples, device);
  const reads = run.length > 0 && run.every(s => s.low !== null);
  const minSpan = reads ? MIN_CLIMB_S : MIN_CLIMB_S_WITHOUT_READS;
  const raw = floorWindows(run);
  const windows = erodeFloor(raw);
  const minPoints = Math.max(
    reads ? MIN_FLOOR_POINTS : MIN_FLOOR_POINTS_WITHOUT_READS,
    settings.leakMinPoints
  );
  if (windows.length < minPoints) {
    return null;
  }
  const xs = windows.map(w => w.t);
  const ys = windows.map(w => w.floor);
  const samplesSince = (t: number) => run.filter(s => s.t >= t).length;
  const line = detectSteadyRise(
    ys,
    {
      minPoints,
      minR2: settings.leakMinR2,
      minSlope: MIN_RISE_PER_MINUTE / 60,
      maxPoints: 1000,
      minSpan
    },
    xs
  );
  const from = windows.length - line.points;
  if (
    line.verdict === 'rising' &&
    stillClimbing(windows, line.slope) &&
    aboveNoise(raw.slice(from), line)
  ) {
    const first = windows[from];
    const latest = windows[windows.length - 1];
    return {
      ...line,
      points: samplesSince(first.t - windowGap(windows)),
      shape: 'ramp',
      since: first.t,
      floor: {
        t: latest.t,
        bytes: line.intercept + line.slope * latest.t
      },
      interval: null
    };
  }
  if (!reads) {
    return null;
  }
  const stairs = detectStairs(raw, {
    minR2: settings.leakMinR2,
    minSpan: MIN_CLIMB_S,
    minStep: MIN_STAIR_STEP
  });
  if (!stairs || stairs.slope < MIN_RISE_PER_MINUTE / 60) {
    return null;
  }
  return {
    verdict: 'rising',
    slope: stairs.slope,
    r2: stairs.r2,
    points: samplesSince(stairs.since),
    intercept: stairs.floor.bytes - stairs.slope * stairs.floor.t,
    shape: 'stairs',
    since: stairs.since,
    floor: stairs.floor,
    interval: stairs.interval
  };
}

/**
 * Whether the floor still climbs over the last {@link RECENT_S} seconds at
 * half the fitted slope at least: a warm-up that rose for a few seconds and
 * has stayed flat since is not a climb, even while the line over all its
 * windows still fits.
 */
function stillClimbing(
  windows: ReadonlyArray<{ t: number; floor: number }>,
  slope: number
): boolean {
  const latest = windows[windows.length - 1].t;
  const recent = windows.filter(w => w.t >= latest - RECENT_S);
  if (recent.length < 3) {
    return true; // too few to tell (wide windows): the line's own checks decide
  }
  const fit = fitLine(
    recent.map(w => w.t),
    recent.map(w => w.floor)
  );
  return fit.slope >= 0.5 * slope;
}

/**
 * Whether a fitted climb stands out of the floor's own noise: its rise over
 * the stretch is at least {@link MIN_RISE_OVER_NOISE} times the median
 * distance of the raw windows from the line. A window's floor lands above
 * the true floor by a random amount (more when the sawtooth is tall and the
 * reads few), and a run of unlucky windows can look like a short climb.
 */
function aboveNoise(
  stretch: ReadonlyArray<{ t: number; floor: number }>,
  fit: { slope: number; intercept: number }
): boolean {
  if (stretch.length < 2) {
    return false;
  }
  const residuals = stretch.map(w =>
    Math.abs(w.floor - (fit.intercept + fit.slope * w.t))
  );
  const span = stretch[stretch.length - 1].t - stretch[0].t;
  return fit.slope * span >= MIN_RISE_OVER_NOISE * median(residuals);
}

/** The typical time between floor windows (s). */
function windowGap(windows: ReadonlyArray<{ t: number }>): number {
  return windows.length > 1
    ? (windows[windows.length - 1].t - windows[0].t) / (windows.length - 1)
    : 0;
}

/**
 * Leak trend of one device: first over the allocated value after each cell;
 * when that gives no verdict, over the samples of the latest long cell (the
 * one running now, else the last one: {@link cellClimb}), so a climb inside
 * one training cell is seen too.
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
  const cells = detectSteadyRise(
    rows.map(r => r.after),
    {
      minPoints: settings.leakMinPoints,
      minR2: settings.leakMinR2,
      minSlope: MIN_RISE_PER_CELL
    }
  );
  const byCells: ILeakTrend = {
    ...cells,
    basis: 'cells',
    device,
    rate: cells.slope,
    executionCount: null,
    shape: null,
    since: null,
    floor: null,
    interval: null,
    cellStart: null
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
  if (begin >= end) {
    return byCells;
  }
  const climb = cellClimb(samples.slice(begin, end), device, settings);
  if (!climb) {
    return byCells;
  }
  return {
    ...climb,
    basis: 'samples',
    device,
    rate: climb.slope * 60,
    executionCount,
    cellStart: samples[begin].t
  };
}
