/**
 * The floor of PyTorch's allocated memory inside one running cell, and the
 * two shapes of a climbing floor (a ramp, stairs) judged on it.
 *
 * During training, allocated memory is a sawtooth: each step allocates its
 * activations in the forward pass and frees them in the backward pass. What
 * stays allocated between steps (weights, optimizer state, tensors kept
 * alive) is the floor under that sawtooth; a leak lifts it, training does
 * not. The floor of a time window is the lowest allocated seen in it: the
 * samples' own values, and, from agents that report it, `allocatedMin` (the
 * lowest of the sampler's reads every ~50 ms since the previous sample),
 * which finds the floor within a second at any step period.
 *
 * Windows are in time, not in samples, so that a verdict needs the same
 * seconds of climbing at any sample rate.
 */
import type { ISample } from '../../protocol';
import { fitLine } from './fit';

const MiB = 2 ** 20;

/** One floor window. Bytes and seconds since the epoch. */
export interface IFloorPoint {
  /** Time of the window's last sample. */
  t: number;
  /** Lowest allocated in the window. */
  floor: number;
  /** Highest allocated sample in the window (the sawtooth's top, as far as samples caught it). */
  peak: number;
}

/** Shortest floor window (s). */
export const MIN_WINDOW_S = 1;
/**
 * Samples per floor window when the samples carry no `allocatedMin` (older
 * agents): the lowest of so many random phases of a step is near its floor.
 */
export const SAMPLES_PER_WINDOW = 4;

/** One sample's figures of a device for the floor. */
export interface IFloorSample {
  t: number;
  allocated: number;
  /** `allocatedMin` when the agent reports it. */
  low: number | null;
}

/**
 * The width of the floor windows for a run of samples (s): one sample
 * interval (at least {@link MIN_WINDOW_S}) when every sample carries
 * `allocatedMin`, else {@link SAMPLES_PER_WINDOW} intervals.
 */
export function windowWidth(samples: ReadonlyArray<IFloorSample>): number {
  if (samples.length < 2) {
    return MIN_WINDOW_S;
  }
  const gaps: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    gaps.push(samples[i].t - samples[i - 1].t);
  }
  const interval = median(gaps);
  const withLows = samples.every(s => s.low !== null);
  return Math.max(
    MIN_WINDOW_S,
    (withLows ? 1 : SAMPLES_PER_WINDOW) * interval * 0.999
  );
}

/**
 * Floor windows of a run of samples: consecutive windows of `width` seconds
 * from the first sample; a window without samples gives no point.
 *
 * @param samples - one device's figures, in time order.
 * @param width - window width in seconds (default {@link windowWidth}).
 */
export function floorWindows(
  samples: ReadonlyArray<IFloorSample>,
  width = windowWidth(samples)
): IFloorPoint[] {
  const points: IFloorPoint[] = [];
  if (!samples.length) {
    return points;
  }
  const origin = samples[0].t;
  let index = -1;
  for (const s of samples) {
    const k = Math.floor((s.t - origin) / width);
    const low = Math.min(s.allocated, s.low ?? s.allocated);
    if (k !== index) {
      points.push({ t: s.t, floor: low, peak: s.allocated });
      index = k;
    } else {
      const p = points[points.length - 1];
      p.t = s.t;
      p.floor = Math.min(p.floor, low);
      p.peak = Math.max(p.peak, s.allocated);
    }
  }
  return points;
}

/**
 * The floor series with its one-sided noise reduced: each point's floor
 * becomes the lowest of itself and the next `ahead` windows (a forward
 * erosion). A window's floor can only be too high (no read fell on a step's
 * lowest phase), never too low; and a floor that climbs never comes back
 * down, so the floor at a time is at most any later window's. A step up
 * stays where it was; the last windows, with fewer after them, keep more
 * of their noise.
 */
export function erodeFloor(
  points: ReadonlyArray<IFloorPoint>,
  ahead = 2
): IFloorPoint[] {
  return points.map((p, k) => {
    let floor = p.floor;
    for (let i = k + 1; i <= Math.min(points.length - 1, k + ahead); i++) {
      floor = Math.min(floor, points[i].floor);
    }
    return { ...p, floor };
  });
}

/** The figures of `device` in busy samples, for {@link floorWindows}; a sample without them ends the run (a new run starts after it). */
export function floorSamples(
  samples: ReadonlyArray<ISample>,
  device: number
): IFloorSample[] {
  let out: IFloorSample[] = [];
  for (const sample of samples) {
    const d = sample.devices.find(x => x.index === device);
    if (!d || d.allocated === null) {
      out = [];
      continue;
    }
    out.push({
      t: sample.t,
      allocated: d.allocated,
      low: d.allocatedMin ?? null
    });
  }
  return out;
}

/** The median of a non-empty list. */
export function median(values: ReadonlyArray<number>): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** A level of the floor: a run of windows around one value. */
export interface IFloorLevel {
  /** Index of its first point. */
  first: number;
  /** Index of its last point. */
  last: number;
  /** Its value: the median floor of its points (bytes). */
  value: number;
  /** When it began: the time of the point before its first (the step happened in between), or its first point's. */
  start: number;
}

/**
 * Cut a floor series into levels: a new level begins where two points in a
 * row leave the current level's median by more than `threshold` (a single
 * point off is noise). A last point that leaves the level alone is not
 * assigned to it (it may be the next step).
 */
export function floorLevels(
  points: ReadonlyArray<IFloorPoint>,
  threshold: number
): IFloorLevel[] {
  const levels: IFloorLevel[] = [];
  if (!points.length) {
    return levels;
  }
  let values: number[] = [points[0].floor];
  let first = 0;
  let last = 0;
  const close = () =>
    levels.push({
      first,
      last,
      value: median(values),
      start: first > 0 ? points[first - 1].t : points[first].t
    });
  for (let k = 1; k < points.length; k++) {
    const ref = median(values);
    const off = (i: number) => points[i].floor - ref;
    const leaves = Math.abs(off(k)) > threshold;
    if (!leaves) {
      values.push(points[k].floor);
      last = k;
      continue;
    }
    const next = k + 1 < points.length ? off(k + 1) : null;
    if (next === null) {
      break; // the last point alone: not yet a level
    }
    if (Math.abs(next) > threshold && Math.sign(next) === Math.sign(off(k))) {
      close();
      values = [points[k].floor];
      first = last = k;
    }
    // else: one point off (noise); left out of the level
  }
  close();
  return levels;
}

/** Thresholds of {@link detectStairs}. */
export interface IStairsOptions {
  /** Lowest R² of the line through the levels (0–1). */
  minR2: number;
  /** Shortest climb, from the level before the first step to the last point (s). */
  minSpan: number;
  /** Smallest step that counts (bytes). */
  minStep: number;
}

/** A stairs climb found by {@link detectStairs}. */
export interface IStairs {
  /** Bytes per second: the mean step over the mean time between steps. */
  slope: number;
  /** R² of the line through the levels. */
  r2: number;
  /** Steps up. */
  steps: number;
  /** Mean time between steps (s): one epoch, for a leak per epoch. */
  interval: number;
  /** Floor points from the level before the first step on. */
  points: number;
  /** When the level before the first step began (s since the epoch). */
  since: number;
  /** The latest level's value (bytes) and the latest point's time. */
  floor: { t: number; bytes: number };
}

/**
 * Look for stairs at the end of a floor series: the floor steps up by
 * similar amounts at regular times (tensors kept once per epoch, e.g. a
 * validation's losses with their graphs) while training runs.
 *
 * The trailing levels (at least three: two steps) count when
 * - every step goes up, by more than `minStep` and the noise, and the largest
 *   is at most twice the smallest;
 * - the levels between steps lasted within a factor of 2 of each other;
 * - the level before the first step lasted at least half an interval (a
 *   flat epoch before the climb; not a model load at the cell's start);
 * - the latest level is younger than 1.5 intervals (the next step is due:
 *   stairs that stopped are not climbing);
 * - a sawtooth ran on every level before a step (training, not a cell that
 *   loads things one after the other);
 * - the climb spans `minSpan` seconds and the line through the levels has R²
 *   of at least `minR2`.
 *
 * @returns the stairs, or null.
 */
export function detectStairs(
  raw: ReadonlyArray<IFloorPoint>,
  options: IStairsOptions
): IStairs | null {
  if (raw.length < 4) {
    return null;
  }
  let points = raw;
  // The noise of one window's floor, from the raw windows (most differences
  // between neighbours are noise: steps are few); the levels are cut on the
  // eroded series, whose noise is a fraction of that.
  const diffs: number[] = [];
  for (let k = 1; k < raw.length; k++) {
    diffs.push(Math.abs(raw[k].floor - raw[k - 1].floor));
  }
  const noise = median(diffs);
  const threshold = Math.max(options.minStep, STEP_NOISE * noise);
  points = erodeFloor(points);
  const levels = floorLevels(points, threshold);
  const m = levels.length;
  if (m < 3) {
    return null;
  }
  const latest = points[points.length - 1];
  // Runs ending at the latest level, from the longest.
  for (let j = 0; j <= m - 3; j++) {
    const run = levels.slice(j);
    const steps = run.slice(1).map((l, i) => l.value - run[i].value);
    // Each step above the noise inside the levels after the first step
    // (training's noise, not that of a quiet start).
    const inside: number[] = [];
    for (const l of run.slice(1)) {
      for (let k = l.first + 1; k <= l.last; k++) {
        inside.push(Math.abs(raw[k].floor - raw[k - 1].floor));
      }
    }
    const significant = Math.max(
      threshold,
      STEP_NOISE * (inside.length >= 3 ? median(inside) : noise)
    );
    if (steps.some(s => s <= significant)) {
      continue;
    }
    if (Math.max(...steps) > 2 * Math.min(...steps)) {
      continue;
    }
    // Durations of the levels between steps.
    const full = run.slice(1, -1).map((l, i) => run[i + 2].start - l.start);
    const interval = median(full);
    if (Math.max(...full) > 2 * Math.min(...full)) {
      continue;
    }
    const firstLasted = run[1].start - points[run[0].first].t;
    if (firstLasted < 0.5 * interval) {
      continue;
    }
    const lastLevel = run[run.length - 1];
    if (latest.t - lastLevel.start > 1.5 * interval) {
      continue;
    }
    // Training on every level before a step: a sample caught the sawtooth
    // above the floor in at least one of its windows.
    const quiet = run.slice(0, -1).some(l => {
      for (let k = l.first; k <= l.last; k++) {
        if (raw[k].peak - raw[k].floor > significant) {
          return false;
        }
      }
      return true;
    });
    if (quiet) {
      continue;
    }
    const since = run[1].start - interval;
    if (latest.t - since < options.minSpan) {
      continue;
    }
    // The line through the levels, each at the time it began (the first one an interval before the first step).
    const xs = [since, ...run.slice(1).map(l => l.start)];
    const ys = run.map(l => l.value);
    const fit = fitLine(xs, ys);
    if (fit.r2 < options.minR2) {
      continue;
    }
    const rise = ys[ys.length - 1] - ys[0];
    return {
      slope: rise / (steps.length * interval),
      r2: fit.r2,
      steps: steps.length,
      interval,
      points: points.length - run[0].first,
      since,
      floor: { t: latest.t, bytes: lastLevel.value }
    };
  }
  return null;
}

/**
 * A step of stairs must exceed this many times the typical difference
 * between neighbouring windows (the floor's noise: the lowest read of a
 * window lands above the true floor by a random amount).
 */
export const STEP_NOISE = 3;

/** Smallest step of stairs that counts (bytes). */
export const MIN_STAIR_STEP = 8 * MiB;
