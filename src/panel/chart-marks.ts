/**
 * What the VRAM chart draws besides its series, as pure functions: the
 * projection of a climb inside the running cell (a dashed line from the
 * floor at the fitted rate, to where the GPU is full) and a mark at each
 * epoch of a training the agent follows (`sample.progress`).
 */
import type { IProjection } from '../analysis/memory/projection';

/** A point of the chart: seconds since the epoch, bytes. */
export interface IChartPoint {
  x: number;
  y: number;
}

/** The projection as the chart draws it. */
export interface IProjectionLine {
  /** The dashed segment: from the latest floor at the fitted slope to `end`. */
  segment: [IChartPoint, IChartPoint];
  /** When the GPU is full (s since the epoch), or null when that is beyond the chart. */
  full: number | null;
  /** The x axis's end: the data's end, or farther to show the projection (s since the epoch). */
  xMax: number;
  /** Seconds from the segment's start until the GPU is full (the label: "full in ~17 min"). */
  seconds: number;
  /** What fills: the device, or the allocator's cap. */
  bound: IProjection['bound'];
  /** The allocator's cap for a horizontal line (bytes), when it is what fills, else null. */
  limit: number | null;
}

/**
 * How far past the data the x axis may grow for a projection: a quarter of
 * the data's span, at least {@link MIN_AHEAD_S}. A GPU that fills later is
 * drawn as a segment to the chart's edge, and its time is in the label.
 */
export const AHEAD_SHARE = 0.25;
export const MIN_AHEAD_S = 30;

/**
 * The chart's projection line, or null (no projection, or no time to full
 * within the projection's horizon).
 *
 * @param projection - {@link projectFull} of the running cell's climb.
 * @param range - the data's time range (s since the epoch).
 */
export function projectionLine(
  projection: IProjection | null,
  range: { from: number; to: number }
): IProjectionLine | null {
  if (!projection || projection.seconds === null) {
    return null;
  }
  const start = projection.from;
  const full = start.t + projection.seconds;
  const ahead = Math.max(MIN_AHEAD_S, AHEAD_SHARE * (range.to - range.from));
  const edge = Math.max(range.to, start.t) + ahead;
  const endT = Math.min(full, edge);
  const end = {
    x: endT,
    y: start.bytes + projection.slope * (endT - start.t)
  };
  return {
    segment: [{ x: start.t, y: start.bytes }, end],
    full: full <= edge ? full : null,
    xMax: Math.max(range.to, endT),
    seconds: projection.seconds,
    bound: projection.bound,
    limit: projection.bound === 'limit' ? projection.limit : null
  };
}

/** A training's progress in a sample (`sample.progress`: the trainer's 0-based epoch in progress, of `epochs`). */
export interface IProgress {
  epoch: number;
  epochs: number;
}

/** A vertical mark where an epoch began. */
export interface IEpochMark {
  /** The first sample of the epoch (s since the epoch). */
  t: number;
  /** The epoch, 1-based as the trainer prints it (the label: "epoch 3"). */
  epoch: number;
}

/**
 * Marks at the epochs' starts: wherever a sample's `progress.epoch` differs
 * from the previous sample's (a training's first sample included), within
 * `[from, to]`, the latest `max` of them.
 *
 * @param samples - samples in time order; `progress` absent or null where no trainer trains.
 */
export function epochMarks(
  samples: ReadonlyArray<{ t: number; progress?: IProgress | null }>,
  range: { from: number; to: number },
  max = 50
): IEpochMark[] {
  const marks: IEpochMark[] = [];
  let previous: number | null = null;
  for (const sample of samples) {
    const epoch = sample.progress?.epoch ?? null;
    if (
      epoch !== null &&
      epoch !== previous &&
      sample.t >= range.from &&
      sample.t <= range.to
    ) {
      marks.push({ t: sample.t, epoch: epoch + 1 });
    }
    previous = epoch;
  }
  return marks.slice(-max);
}
