/**
 * Formatting of memory figures for the screen. The protocol carries bytes;
 * the UI shows IEC units (KiB, MiB, GiB: powers of 1024).
 */
import type { TranslationBundle } from '@jupyterlab/translation';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/**
 * Longest toast message, in characters: JupyterLab's `Notification` cuts a
 * message beyond this length, so the toast texts shorten themselves to fit.
 */
export const MAX_TOAST = 140;

/**
 * Format a byte count with IEC units, e.g. `12_582_912` → `"12.0 MiB"`.
 *
 * @param bytes - a byte count; `null`, `undefined`, negative or non-finite
 *   values give `"n/a"`.
 * @param digits - decimals for units above bytes (default 1).
 */
export function formatBytes(
  bytes: number | null | undefined,
  digits = 1
): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) {
    return 'n/a';
  }
  if (bytes < 0) {
    return 'n/a';
  }
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(digits)} ${UNITS[unit]}`;
}

/**
 * Sum a `{device: bytes}` map.
 *
 * @param perDevice - bytes per device name (`"cpu"`, `"cuda:0"`, ...).
 * @param filter - keep only device names for which this returns true.
 */
export function sumBytes(
  perDevice: Record<string, number>,
  filter: (device: string) => boolean = () => true
): number {
  let total = 0;
  for (const [device, value] of Object.entries(perDevice)) {
    if (filter(device)) {
      total += value;
    }
  }
  return total;
}

/** True for CUDA device names such as `"cuda:0"`. */
export function isCudaDevice(device: string): boolean {
  return device.startsWith('cuda');
}

/**
 * A cell's duration for the panel's table: `850 ms`, `12.3 s`, `4 min 05 s`.
 *
 * @param ms - milliseconds; `null` (shorter than the sample interval) or a
 *   non-finite value gives `"—"`.
 */
export function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) {
    return '—';
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  if (ms < 60_000) {
    return `${(ms / 1000).toFixed(1)} s`;
  }
  const seconds = Math.round(ms / 1000);
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${String(seconds % 60).padStart(2, '0')} s`;
}

/**
 * A signed byte delta with IEC units: `+12.0 MiB`, `−3.0 MiB` (a minus sign,
 * U+2212), `0 B`.
 *
 * @param bytes - a byte difference; `null` (not measured) gives `"n/a"`.
 */
export function formatDelta(bytes: number | null): string {
  if (bytes === null) {
    return 'n/a';
  }
  if (bytes === 0) {
    return '0 B';
  }
  return `${bytes > 0 ? '+' : '−'}${formatBytes(Math.abs(bytes))}`;
}

/**
 * Describe where a model's bytes live, e.g. `"12.1 MiB on cuda:0"` or
 * `"12.1 MiB in RAM"`; several devices are joined with `" + "`. With `trans`,
 * in the user's language (on screen); without, in English (generated code).
 */
export function formatPlacement(
  perDevice: Record<string, number>,
  trans?: TranslationBundle
): string {
  const parts = Object.entries(perDevice)
    .filter(([, value]) => value > 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([device, value]) => {
      const bytes = formatBytes(value);
      if (!trans) {
        // Code and its comments (the generated cells) stay in English.
        return isCudaDevice(device)
          ? `${bytes} on ${device}`
          : `${bytes} in RAM`;
      }
      return isCudaDevice(device)
        ? trans.__('%1 on %2', bytes, device)
        : trans.__('%1 in RAM', bytes);
    });
  return parts.length ? parts.join(' + ') : formatBytes(0);
}

/**
 * A list of names for one line of text: the first `max` joined with `", "`,
 * then how many more in words, e.g. `listNames(['a', 'b', 'c'], 2, trans)` →
 * `"a, b and 1 more"` (it was `"a, b +1"`, which read as arithmetic).
 */
export function listNames(
  names: ReadonlyArray<string>,
  max: number,
  trans: TranslationBundle
): string {
  return names.length <= max
    ? names.join(', ')
    : trans.__(
        '%1 and %2 more',
        names.slice(0, Math.max(1, max)).join(', '),
        names.length - Math.max(1, max)
      );
}

/**
 * `text` within `max` characters, cut in the middle so that both ends stay
 * readable: `shortenMiddle('BertForSequenceClassification', 16)` →
 * `"BertFor…ication"`. Text that fits is returned as is.
 *
 * @param max - at least 5.
 */
export function shortenMiddle(text: string, max: number): string {
  const room = Math.max(5, max);
  if (text.length <= room) {
    return text;
  }
  const tail = Math.floor((room - 1) / 2);
  const head = room - 1 - tail;
  return `${text.slice(0, head)}…${text.slice(text.length - tail)}`;
}

/**
 * The first of `candidates` (most detailed first) that fits a toast
 * ({@link MAX_TOAST} characters); the last one cut with "…" only when none
 * fits. The candidates are produced lazily: pass a generator to compose only
 * as many as needed.
 *
 * @throws Error when `candidates` is empty.
 */
export function fitText(candidates: Iterable<string>, max = MAX_TOAST): string {
  let last: string | null = null;
  for (const text of candidates) {
    if (text.length <= max) {
      return text;
    }
    last = text;
  }
  if (last === null) {
    throw new Error('fitText: no candidate text');
  }
  return `${last.slice(0, max - 1)}…`;
}

/**
 * How long something has been idle, coarsely: `40 s`, `25 min`, `2 h 05 min`,
 * `3 d 4 h`.
 *
 * @param seconds - a duration in seconds; `null` or a non-finite or negative
 *   value gives `"—"`.
 */
export function formatIdle(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) {
    return '—';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 24) {
    return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
  }
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/**
 * A time left, rounded for a warning: `40 s` (to 5 s under 90 s), `12 min`
 * (under 90 minutes), `2 h 05 min`.
 *
 * @param seconds - a duration in seconds; `null` or a non-finite or negative
 *   value gives `"—"`.
 */
export function formatTimeLeft(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) {
    return '—';
  }
  if (seconds < 90) {
    return `${Math.round(seconds / 5) * 5} s`;
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) {
    return `${minutes} min`;
  }
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}
