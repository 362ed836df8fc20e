/**
 * Downsampling of time series for the chart: at most `maxPoints` rows, and
 * every series keeps its minimum and maximum in each bucket, so a peak (the
 * moment before an out-of-memory error) is never averaged away.
 */

/** One chart row: a time (seconds since the epoch) and values (bytes or null). */
export type SeriesRow<K extends string> = { t: number } & Record<
  K,
  number | null
>;

/**
 * Downsample rows by min/max per bucket.
 *
 * The rows are cut into `floor(maxPoints / 2)` buckets of consecutive rows;
 * each bucket becomes two rows, at the time of its first and of its last row.
 * For each key, the first of the two rows carries whichever of the bucket's
 * minimum and maximum came first, the second row the other, so the shape of
 * a rise or a fall is kept. `null` values are ignored (a bucket with only
 * nulls for a key gives nulls).
 *
 * @param rows - rows in time order.
 * @param keys - the series to keep.
 * @param maxPoints - the most rows returned (≥ 2; default 500).
 * @returns `rows` itself when it is already short enough, else new rows; the
 *   maximum and the minimum of every series are always present.
 */
export function downsampleMinMax<K extends string>(
  rows: ReadonlyArray<SeriesRow<K>>,
  keys: ReadonlyArray<K>,
  maxPoints = 500
): ReadonlyArray<SeriesRow<K>> {
  const limit = Math.max(2, Math.floor(maxPoints));
  if (rows.length <= limit) {
    return rows;
  }
  const buckets = Math.floor(limit / 2);
  const result: SeriesRow<K>[] = [];
  for (let b = 0; b < buckets; b++) {
    const from = Math.floor((b * rows.length) / buckets);
    const to = Math.floor(((b + 1) * rows.length) / buckets);
    if (to <= from) {
      continue;
    }
    const first = { t: rows[from].t } as SeriesRow<K>;
    const second = { t: rows[to - 1].t } as SeriesRow<K>;
    for (const key of keys) {
      let min: number | null = null;
      let max: number | null = null;
      let minAt = -1;
      let maxAt = -1;
      for (let i = from; i < to; i++) {
        const value = rows[i][key];
        if (value === null || value === undefined || Number.isNaN(value)) {
          continue;
        }
        if (min === null || value < min) {
          min = value;
          minAt = i;
        }
        if (max === null || value > max) {
          max = value;
          maxAt = i;
        }
      }
      const minFirst = minAt <= maxAt;
      (first as Record<K, number | null>)[key] = minFirst ? min : max;
      (second as Record<K, number | null>)[key] = minFirst ? max : min;
    }
    result.push(first);
    if (to - from > 1) {
      result.push(second);
    }
  }
  return result;
}
