/**
 * Epochs of an Ultralytics training cell, from the `progress` the agent puts
 * in the samples it takes while the trainer's epoch loop runs
 * (`src/agent/gpu_hygiene_agent/progress.py`): which epochs the samples saw
 * and the highest PyTorch allocated and reserved bytes during each. Nothing
 * runs in the user's notebook for this.
 */
import type { ISample } from '../../protocol';

/** One epoch as the samples saw it. Bytes are PyTorch's caching allocator's, of one device. */
export interface IEpochPeak {
  /** 0-based epoch (the trainer's `epoch`); on screen `epoch + 1`, as Ultralytics prints it. */
  epoch: number;
  /** Time of its first and last sample, seconds since the epoch. */
  start: number;
  end: number;
  /** Samples that carry this epoch (at least 1). */
  samples: number;
  /** Highest allocated among them, or null (no CUDA figures: CPU, CUDA not initialised). */
  allocated: number | null;
  /** Highest reserved among them, or null. */
  reserved: number | null;
}

/** One run of a trainer's epoch loop within a cell. */
export interface ITrainingEpochs {
  /** The trainer's total epochs (`epochs` of the run's last sample). */
  epochs: number;
  /**
   * The epochs seen, in order. An epoch shorter than the sample interval may
   * have no sample and is then missing.
   */
  peaks: IEpochPeak[];
}

/** What a cell's samples say about the trainings it ran. */
export interface ICellEpochs {
  /**
   * Runs of the epoch loop, in order (usually one; a cell that trains twice
   * has two: a new run starts where the epoch goes down).
   */
  trainings: ITrainingEpochs[];
}

function maxOf(a: number | null, b: number | null | undefined): number | null {
  if (b === null || b === undefined) {
    return a;
  }
  return a === null || b > a ? b : a;
}

/** Index of the first sample with `t >= time` (samples are in time order). */
function firstAtOrAfter(samples: ReadonlyArray<ISample>, time: number): number {
  let lo = 0;
  let hi = samples.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (samples[mid].t < time) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/**
 * The epochs of one cell, from its busy samples with a `progress`.
 *
 * @param samples - the model's samples, in time order.
 * @param start - the cell's first busy sample (`ICellRow.start`); null: the
 *   cell had no sample, so no epoch.
 * @param end - the cell's end (`ICellRow.end`, its `post_run_cell`).
 * @param device - CUDA device index whose allocated/reserved bytes are the peaks.
 * @returns null when no sample of the cell carries a `progress`.
 */
export function cellEpochs(
  samples: ReadonlyArray<ISample>,
  start: number | null,
  end: number,
  device: number
): ICellEpochs | null {
  if (start === null) {
    return null;
  }
  const trainings: ITrainingEpochs[] = [];
  let training: ITrainingEpochs | null = null;
  let peak: IEpochPeak | null = null;
  for (let i = firstAtOrAfter(samples, start); i < samples.length; i++) {
    const s = samples[i];
    if (s.t > end) {
      break;
    }
    const progress = s.progress;
    if (!s.busy || !progress) {
      continue;
    }
    if (peak === null || training === null || progress.epoch < peak.epoch) {
      training = { epochs: progress.epochs, peaks: [] };
      trainings.push(training);
      peak = null;
    }
    training.epochs = progress.epochs;
    const figures = s.devices.find(d => d.index === device);
    if (peak === null || progress.epoch !== peak.epoch) {
      peak = {
        epoch: progress.epoch,
        start: s.t,
        end: s.t,
        samples: 0,
        allocated: null,
        reserved: null
      };
      training.peaks.push(peak);
    }
    peak.end = s.t;
    peak.samples++;
    peak.allocated = maxOf(peak.allocated, figures?.allocated);
    peak.reserved = maxOf(peak.reserved, figures?.reserved);
  }
  return trainings.length ? { trainings } : null;
}

/**
 * {@link cellEpochs} of each per-cell row (the rows of `cellRows`,
 * src/analysis/cells/cell-history.ts), in the same order.
 */
export function epochsByCell(
  samples: ReadonlyArray<ISample>,
  rows: ReadonlyArray<{ start: number | null; end: number }>,
  device: number
): Array<ICellEpochs | null> {
  return rows.map(row => cellEpochs(samples, row.start, row.end, device));
}

/**
 * Whether a training's samples saw its whole epoch loop: its first epoch (0)
 * to its last (`epochs - 1`), none missing.
 */
export function sawAllEpochs(training: ITrainingEpochs): boolean {
  const { peaks, epochs } = training;
  return peaks.length === epochs && peaks.every((p, i) => p.epoch === i);
}
