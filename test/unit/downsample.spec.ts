import {
  downsampleMinMax,
  SeriesRow
} from '../../src/analysis/memory/downsample';

type Row = SeriesRow<'a' | 'b'>;

function series(n: number, f: (i: number) => number | null): Row[] {
  return Array.from({ length: n }, (_, i) => ({ t: i, a: f(i), b: 1 }));
}

describe('downsampleMinMax', () => {
  it('returns short series as they are', () => {
    const rows = series(100, i => i);
    expect(downsampleMinMax(rows, ['a', 'b'], 500)).toBe(rows);
  });

  it('draws at most 500 points from 10k and keeps the peak and the floor', () => {
    const rows = series(10_000, i => 1000 + (i % 7));
    rows[7_777].a = 99_999; // a one-sample spike
    rows[1_234].a = -5; // a one-sample dip
    const out = downsampleMinMax(rows, ['a', 'b'], 500);
    expect(out.length).toBeLessThanOrEqual(500);
    expect(out.length).toBeGreaterThan(400);
    const values = out.map(r => r.a as number);
    expect(Math.max(...values)).toBe(99_999);
    expect(Math.min(...values)).toBe(-5);
    // Times stay in order and within the original range.
    for (let i = 1; i < out.length; i++) {
      expect(out[i].t).toBeGreaterThanOrEqual(out[i - 1].t);
    }
    expect(out[0].t).toBe(0);
    expect(out[out.length - 1].t).toBe(9_999);
  });

  it('keeps each series’ own extremes and the order of min and max', () => {
    const rows = series(1_000, i => (i === 10 ? 50 : i === 11 ? -50 : 0));
    rows[500].b = 7;
    const out = downsampleMinMax(rows, ['a', 'b'], 100);
    const bucket = out.findIndex(r => r.a === 50);
    expect(out[bucket + 1].a).toBe(-50); // the rise came before the fall
    expect(Math.max(...out.map(r => r.b as number))).toBe(7);
  });

  it('ignores nulls and gives null for an all-null bucket', () => {
    const rows = series(1_000, i => (i < 500 ? null : i));
    const out = downsampleMinMax(rows, ['a'], 10);
    expect(out[0].a).toBeNull();
    expect(out[out.length - 1].a).toBe(999);
  });
});
