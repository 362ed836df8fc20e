/**
 * When a climb inside a running cell fills the GPU: the room this kernel
 * still has on the device, and the time the fitted rate takes to use it.
 */
import type { IDeviceSample, ISample } from '../../protocol';
import type { ILeakTrend } from './leak-trend';

/**
 * Beyond this (s) the projection says nothing about time: a GPU that would
 * fill in more than two hours does not fill during this cell as far as
 * anyone can tell from a minute of samples.
 */
export const PROJECTION_HORIZON_S = 2 * 3600;

/** Samples of the last this many seconds give the sawtooth's top (s). */
export const TOP_WINDOW_S = 10;

/** The room of one device sample. */
export interface IRoom {
  /**
   * Bytes PyTorch can still allocate: the smaller of the device's free
   * memory plus this kernel's cache (`total − used + cached`, NVML and torch)
   * and the allocator's cap less allocated (`limit − allocated`); ≥ 0.
   */
  bytes: number;
  /** What bounds it: the device (NVML) or the cap (`set_per_process_memory_fraction`). */
  bound: 'device' | 'limit';
}

/**
 * The room of one device sample ({@link IRoom}), or null when neither the
 * device (NVML's used and total) nor a cap is known.
 */
export function roomOf(d: IDeviceSample): IRoom | null {
  const rooms: IRoom[] = [];
  if (d.total !== null && d.used !== null) {
    rooms.push({
      bytes: d.total - d.used + (d.cached ?? 0),
      bound: 'device'
    });
  }
  if (d.limit !== undefined && d.limit !== null && d.allocated !== null) {
    rooms.push({ bytes: d.limit - d.allocated, bound: 'limit' });
  }
  if (!rooms.length) {
    return null;
  }
  const least = rooms.reduce((a, b) => (b.bytes < a.bytes ? b : a));
  return { ...least, bytes: Math.max(0, least.bytes) };
}

/** When the GPU is full at the rate of a climb inside a cell. */
export interface IProjection {
  /** What bounds the room: the device or the allocator's cap. */
  bound: 'device' | 'limit';
  /**
   * Allocated bytes at which the next allocation fails: the latest sample's
   * allocated plus its room.
   */
  capacity: number;
  /** The cap (bytes) when the agent reports one, else null. */
  limit: number | null;
  /** The sawtooth's recent top: the highest allocated of the cell's samples in the last {@link TOP_WINDOW_S} s (bytes). */
  top: number;
  /** Where the climb starts from: the trend's floor (s since the epoch, bytes). */
  from: { t: number; bytes: number };
  /** Bytes per second of the climb. */
  slope: number;
  /**
   * Seconds from `from.t` until the top reaches the capacity at the fitted
   * rate: `(capacity − top) / slope`; null beyond {@link PROJECTION_HORIZON_S}.
   */
  seconds: number | null;
}

/**
 * Project a rising climb inside a running cell to the moment the GPU is
 * full. The top of the sawtooth (the activations on the floor) reaches the
 * capacity first, so the time is the room above that top over the floor's
 * rate.
 *
 * @param trend - a `rising` trend of basis `samples` (else null).
 * @param samples - the model's samples, in time order (the latest gives the room).
 * @returns the projection, or null (no climb inside a cell, no room known).
 */
export function projectFull(
  trend: ILeakTrend,
  samples: ReadonlyArray<ISample>
): IProjection | null {
  if (
    trend.verdict !== 'rising' ||
    trend.basis !== 'samples' ||
    !trend.floor ||
    trend.slope <= 0 ||
    !samples.length
  ) {
    return null;
  }
  const latest = samples[samples.length - 1];
  const d = latest.devices.find(x => x.index === trend.device);
  if (!d || d.allocated === null) {
    return null;
  }
  const room = roomOf(d);
  if (!room) {
    return null;
  }
  const capacity = d.allocated + room.bytes;
  let top = Math.max(trend.floor.bytes, d.allocated);
  for (let i = samples.length - 1; i >= 0; i--) {
    const s = samples[i];
    if (s.t < latest.t - TOP_WINDOW_S || !s.busy) {
      break;
    }
    const a = s.devices.find(x => x.index === trend.device)?.allocated;
    if (a !== undefined && a !== null) {
      top = Math.max(top, a);
    }
  }
  const seconds = Math.max(0, capacity - top) / trend.slope;
  return {
    bound: room.bound,
    capacity,
    limit: d.limit ?? null,
    top,
    from: trend.floor,
    slope: trend.slope,
    seconds: seconds > PROJECTION_HORIZON_S ? null : seconds
  };
}
