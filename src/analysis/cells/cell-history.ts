/**
 * Per-cell figures, computed from what the agent already sends: the
 * inventory after each cell (its `executionCount` and `t`) and the samples
 * (whose `busy` flag is set from the cell's `pre_run_cell` to its
 * `post_run_cell`). Nothing runs in the user's notebook for this.
 */
import type { IInventory, ISample } from '../../protocol';
import { userModels } from '../findings/user-models';
import { sumBytes } from '../format';

/** A live model as remembered after a cell (compact: no holders). */
export interface IModelSummary {
  /** Agent id (hex `id()`), stable while the object lives. */
  id: string;
  /** Creation order (smaller = older); with `id` it identifies an instance. */
  order: number;
  /** Display label, e.g. `"YOLO (yolov8n.yaml)"`. */
  label: string;
  /** Class name, e.g. `"YOLO"`. */
  className: string;
  /** Total bytes on all devices (parameters, buffers, gradients). */
  bytes: number;
}

/** What the model keeps of each inventory: when it came and which models were alive. */
export interface ICellMark {
  /** Execution count of the cell that just ran; null for an inventory sent on request. */
  executionCount: number | null;
  /** When the inventory was built (end of the cell), seconds since the epoch. */
  t: number;
  /** When the cell's `post_run_cell` started, seconds: `t` minus the inventory's build time. */
  postRun: number;
  /**
   * Models alive after the cell, as the user counts them (`userModels`:
   * not modules nothing reaches, not parts of another model).
   */
  models: ReadonlyArray<IModelSummary>;
}

/** One row of the per-cell table. Bytes are PyTorch allocated bytes of one device. */
export interface ICellRow {
  /** Execution count (`[n]`). */
  executionCount: number;
  /** Start of the cell (first sample the agent took while it ran), or null for a cell shorter than the sample interval. */
  start: number | null;
  /** End of the cell (its `post_run_cell`), seconds since the epoch. */
  end: number;
  /** Wall time of the cell in milliseconds, or null when no sample fell inside it. */
  durationMs: number | null;
  /** Allocated before the cell, or null (no GPU, CUDA not initialised, no sample). */
  before: number | null;
  /** Allocated after the cell, or null. */
  after: number | null;
  /** `after - before`, or null. */
  delta: number | null;
  /** Highest allocated seen while the cell ran (between samples a spike can be missed), or null. */
  peak: number | null;
  /** Samples taken while the cell ran. */
  samples: number;
  /** Models alive after this cell that were not alive after the previous inventory; null when unknown (no previous inventory kept). */
  created: ReadonlyArray<IModelSummary> | null;
}

/**
 * The compact record of an inventory kept by the model.
 */
export function cellMark(inventory: IInventory): ICellMark {
  return {
    executionCount: inventory.executionCount,
    t: inventory.t,
    postRun: inventory.t - inventory.durationMs / 1000,
    models: userModels(inventory).map(m => ({
      id: m.id,
      order: m.order,
      label: m.label,
      className: m.className,
      bytes: sumBytes(m.bytes)
    }))
  };
}

/**
 * PyTorch allocated bytes of one device in a sample.
 *
 * @returns null when the device is absent or torch/CUDA is not initialised.
 */
export function allocatedOf(sample: ISample, device: number): number | null {
  return sample.devices.find(d => d.index === device)?.allocated ?? null;
}

/**
 * The execution count the kernel gives its next user cell, which is the one
 * running while a cell runs: the latest inventory's count plus one. The
 * agent sends an inventory after every user cell (its `post_run_cell`), and
 * IPython numbers user cells one after the other; a probe without history
 * (`store_history=False`) takes no number and sends none. Null before the
 * first cell's inventory (an agent that arrived mid-session).
 *
 * @param marks - the model's inventory records, oldest first.
 */
export function nextExecutionCount(
  marks: ReadonlyArray<ICellMark>
): number | null {
  for (let k = marks.length - 1; k >= 0; k--) {
    const count = marks[k].executionCount;
    if (count !== null) {
      return count + 1;
    }
  }
  return null;
}

/** Index of the first sample with `t > time` (samples are in time order). */
function firstAfter(samples: ReadonlyArray<ISample>, time: number): number {
  let lo = 0;
  let hi = samples.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (samples[mid].t > time) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

function modelKey(m: IModelSummary): string {
  return `${m.id}:${m.order}`;
}

function maxOf(values: Array<number | null>): number | null {
  let max: number | null = null;
  for (const v of values) {
    if (v !== null && (max === null || v > max)) {
      max = v;
    }
  }
  return max;
}

/**
 * Where a cell's samples lie: `[lo, hi)` those after the previous
 * inventory up to this one's, and its first and last `busy` samples among
 * them (-1 when none).
 */
interface ICellWindow {
  lo: number;
  hi: number;
  firstBusy: number;
  lastBusy: number;
}

/** The window of the cell of `mark`, `previous` the inventory before it (or null). */
function cellWindow(
  samples: ReadonlyArray<ISample>,
  mark: ICellMark,
  previous: ICellMark | null
): ICellWindow {
  const lo = previous ? firstAfter(samples, previous.t) : 0;
  const hi = firstAfter(samples, mark.t); // exclusive
  let firstBusy = -1;
  let lastBusy = -1;
  for (let i = lo; i < hi; i++) {
    if (samples[i].busy) {
      if (firstBusy < 0) {
        firstBusy = i;
      }
      lastBusy = i;
    }
  }
  return { lo, hi, firstBusy, lastBusy };
}

/**
 * Allocated before the cell: the last idle sample before it started (or
 * before `post_run_cell`), not earlier than the previous cell's end
 * (back-to-back cells may have none); where that gives no figure, its
 * first busy sample.
 */
function allocatedBefore(
  samples: ReadonlyArray<ISample>,
  mark: ICellMark,
  previous: ICellMark | null,
  w: ICellWindow,
  device: number
): number | null {
  const start = w.firstBusy >= 0 ? samples[w.firstBusy].t : null;
  const beforeLimit = start ?? mark.postRun;
  const floor = previous ? previous.postRun - 0.05 : -Infinity;
  let before: number | null = null;
  for (let i = (w.firstBusy >= 0 ? w.firstBusy : w.hi) - 1; i >= 0; i--) {
    const s = samples[i];
    if (s.t < floor) {
      break;
    }
    if (s.t < beforeLimit && !s.busy) {
      before = allocatedOf(s, device);
      break;
    }
  }
  if (before === null && w.firstBusy >= 0) {
    before = allocatedOf(samples[w.firstBusy], device);
  }
  return before;
}

/**
 * Allocated after the cell: the first idle sample after its busy samples
 * (or after `post_run_cell`); where that gives no figure, the last sample
 * of its window.
 */
function allocatedAfter(
  samples: ReadonlyArray<ISample>,
  mark: ICellMark,
  w: ICellWindow,
  device: number
): number | null {
  const afterFrom =
    w.lastBusy >= 0 ? w.lastBusy + 1 : firstAfter(samples, mark.postRun - 0.05);
  let after: number | null = null;
  for (let i = afterFrom; i < samples.length; i++) {
    if (!samples[i].busy || samples[i].t > mark.t) {
      after = allocatedOf(samples[i], device);
      break;
    }
  }
  if (after === null && w.hi > w.lo) {
    after = allocatedOf(samples[w.hi - 1], device);
  }
  return after;
}

/** The models alive after `mark` that were not after `previous`; null without `previous`. */
function createdModels(
  mark: ICellMark,
  previous: ICellMark | null
): IModelSummary[] | null {
  if (!previous) {
    return null;
  }
  const known = new Set(previous.models.map(modelKey));
  return mark.models.filter(m => !known.has(modelKey(m)));
}

/** The row of the cell of `mark` (see {@link cellRows}). */
function cellRow(
  samples: ReadonlyArray<ISample>,
  mark: ICellMark & { executionCount: number },
  previous: ICellMark | null,
  device: number
): ICellRow {
  const w = cellWindow(samples, mark, previous);
  const start = w.firstBusy >= 0 ? samples[w.firstBusy].t : null;
  const before = allocatedBefore(samples, mark, previous, w, device);
  const after = allocatedAfter(samples, mark, w, device);
  const during: Array<number | null> = [before, after];
  for (let i = w.firstBusy; i >= 0 && i <= w.lastBusy; i++) {
    during.push(allocatedOf(samples[i], device));
  }
  return {
    executionCount: mark.executionCount,
    start,
    end: mark.postRun,
    durationMs:
      start === null ? null : Math.max(0, (mark.postRun - start) * 1000),
    before,
    after,
    delta: before !== null && after !== null ? after - before : null,
    peak: maxOf(during),
    samples: w.firstBusy < 0 ? 0 : w.lastBusy - w.firstBusy + 1,
    created: createdModels(mark, previous)
  };
}

/**
 * Rows of the per-cell table, oldest first, for one device.
 *
 * - start: the first `busy` sample after the previous inventory; the agent
 *   wakes its sampler at `pre_run_cell`, so this is the cell's start to within
 *   a thread switch. A cell shorter than that has no start (duration null).
 * - before: the last idle sample before the start (or before `post_run_cell`
 *   for a cell without busy samples); after: the first idle sample after the
 *   cell's busy samples (the agent also samples at `post_run_cell`).
 * - peak: the highest allocated among the cell's samples, before and after.
 * - created: models in this inventory that were not in the previous one.
 *
 * @param samples - the model's samples, in time order.
 * @param marks - the model's inventory records, in time order.
 * @param device - CUDA device index.
 */
export function cellRows(
  samples: ReadonlyArray<ISample>,
  marks: ReadonlyArray<ICellMark>,
  device: number
): ICellRow[] {
  const rows: ICellRow[] = [];
  marks.forEach((mark, k) => {
    const { executionCount } = mark;
    if (executionCount !== null) {
      const previous = k > 0 ? marks[k - 1] : null;
      rows.push(
        cellRow(samples, { ...mark, executionCount }, previous, device)
      );
    }
  });
  return rows;
}
