import type { ICellRow } from '../../src/analysis/cells/cell-history';
import {
  detectSteadyRise,
  fitLine,
  leakTrend
} from '../../src/analysis/memory/leak-trend';
import type { ISample } from '../../src/protocol';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const options = { minPoints: 5, minR2: 0.9, minSlope: MiB };

/** Deterministic noise in [-1, 1) (a small LCG, so the tests never flake). */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 31 - 1;
  };
}

describe('fitLine', () => {
  it('fits a line exactly and reports R² = 1', () => {
    const fit = fitLine([0, 1, 2, 3], [1, 3, 5, 7]);
    expect(fit.slope).toBeCloseTo(2);
    expect(fit.intercept).toBeCloseTo(1);
    expect(fit.r2).toBeCloseTo(1);
  });

  it('gives R² = 0 for a constant series', () => {
    expect(fitLine([0, 1, 2], [5, 5, 5])).toEqual({
      slope: 0,
      intercept: 5,
      r2: 0
    });
  });
});

describe('detectSteadyRise (per cell)', () => {
  it('flags a steady rise: ~12 MiB per cell', () => {
    const noise = rng(1);
    const values = Array.from(
      { length: 10 },
      (_, i) => GiB + i * 12 * MiB + noise() * MiB
    );
    const trend = detectSteadyRise(values, options);
    expect(trend.verdict).toBe('rising');
    expect(trend.points).toBe(10);
    expect(trend.slope / MiB).toBeCloseTo(12, 0);
    expect(trend.r2).toBeGreaterThan(0.99);
  });

  it('does not flag a single step up (a model load)', () => {
    for (const at of [1, 3, 5, 8]) {
      const values = Array.from({ length: 10 }, (_, i) =>
        i < at ? GiB : GiB + 500 * MiB
      );
      expect(detectSteadyRise(values, options).verdict).toBe('steady');
    }
  });

  it('does not flag a step up followed by a short ramp that levels off', () => {
    const values = [0, 0, 0, 400, 420, 440, 450, 450, 450, 450].map(
      v => GiB + v * MiB
    );
    expect(detectSteadyRise(values, options).verdict).toBe('steady');
  });

  it('does not flag a sawtooth that returns to baseline', () => {
    const values = Array.from(
      { length: 24 },
      (_, i) => GiB + (i % 6) * 100 * MiB
    );
    expect(detectSteadyRise(values, options).verdict).toBe('steady');
    // Not even while it climbs again, to where it has been before.
    expect(detectSteadyRise(values.slice(0, 17), options).verdict).toBe(
      'steady'
    );
  });

  it('does not flag noise around a level (many seeds)', () => {
    for (let seed = 1; seed <= 50; seed++) {
      const noise = rng(seed);
      const values = Array.from(
        { length: 30 },
        () => 2 * GiB + noise() * 20 * MiB
      );
      expect(detectSteadyRise(values, options).verdict).toBe('steady');
    }
  });

  it('flags a climb that starts after a flat stretch, over the climbing cells', () => {
    const values = [
      ...Array.from({ length: 20 }, () => GiB),
      ...Array.from({ length: 8 }, (_, i) => GiB + (i + 1) * 30 * MiB)
    ];
    const trend = detectSteadyRise(values, options);
    expect(trend.verdict).toBe('rising');
    expect(trend.points).toBeGreaterThanOrEqual(8);
    expect(trend.points).toBeLessThanOrEqual(10);
  });

  it('needs the minimum number of points and the R² threshold', () => {
    const values = [0, 1, 2, 3].map(i => GiB + i * 10 * MiB);
    expect(detectSteadyRise(values, options)).toMatchObject({
      verdict: 'too-few',
      points: 4
    });
    expect(detectSteadyRise(values, { ...options, minPoints: 3 }).verdict).toBe(
      'rising'
    );
    const wobbly = [0, 30, 20, 50, 40, 70, 60, 90].map(v => GiB + v * MiB);
    expect(detectSteadyRise(wobbly, { ...options, minR2: 0.95 }).verdict).toBe(
      'steady'
    );
    expect(detectSteadyRise(wobbly, { ...options, minR2: 0.6 }).verdict).toBe(
      'rising'
    );
  });

  it('ignores a rise below the minimum slope', () => {
    const values = Array.from({ length: 10 }, (_, i) => GiB + i * 1024);
    expect(detectSteadyRise(values, options).verdict).toBe('steady');
  });

  it('gives no verdict when allocated is null (no GPU, CUDA not initialised)', () => {
    expect(detectSteadyRise([null, null, null], options).verdict).toBe(
      'no-data'
    );
    expect(detectSteadyRise([], options).verdict).toBe('too-few');
    // A null breaks the series: only what follows counts.
    const values = [1, 2, 3, 4, 5, null, 6, 7].map(v =>
      v === null ? null : GiB + v * 10 * MiB
    );
    expect(detectSteadyRise(values, options)).toMatchObject({
      verdict: 'too-few',
      points: 2
    });
  });
});

/** Samples of one running cell (busy), one a second, allocated from `f`. */
function trainingSamples(n: number, f: (i: number) => number): ISample[] {
  return Array.from({ length: n }, (_, i) => ({
    protocol: 2 as const,
    type: 'sample' as const,
    t: 1000 + i,
    seq: i + 1,
    busy: true,
    devices: [
      {
        index: 0,
        used: 10 * GiB,
        total: 80 * GiB,
        process: 5 * GiB,
        allocated: f(i),
        reserved: 6 * GiB,
        cached: null,
        nonTorch: null,
        processHidden: false
      }
    ]
  }));
}

function cellRow(executionCount: number, after: number | null): ICellRow {
  return {
    executionCount,
    start: executionCount,
    end: executionCount + 0.5,
    durationMs: 500,
    before: after,
    after,
    delta: 0,
    peak: after,
    samples: 1,
    created: []
  };
}

describe('leakTrend', () => {
  const settings = { leakMinPoints: 5, leakMinR2: 0.9 };

  it('flags allocated climbing per cell', () => {
    const rows = Array.from({ length: 8 }, (_, i) =>
      cellRow(i + 1, GiB + i * 64 * MiB)
    );
    const trend = leakTrend(rows, [], 0, settings);
    expect(trend).toMatchObject({
      verdict: 'rising',
      basis: 'cells',
      points: 8
    });
    expect(trend.rate).toBeCloseTo(64 * MiB);
  });

  it('flags a climb inside one long training cell despite its sawtooth', () => {
    const noise = rng(7);
    // Each step allocates activations (a sawtooth of up to 2 GiB) and keeps
    // ~20 MiB of graph per second alive.
    const samples = trainingSamples(
      180,
      i => 4 * GiB + i * 20 * MiB + Math.abs(noise()) * 2 * GiB
    );
    const trend = leakTrend([], samples, 0, settings);
    expect(trend.verdict).toBe('rising');
    expect(trend.basis).toBe('samples');
    expect(trend.executionCount).toBeNull(); // still running
    expect(trend.rate / MiB).toBeGreaterThan(900); // ~1200 MiB per minute
    expect(trend.rate / MiB).toBeLessThan(1500);
  });

  it('does not flag a training cell whose sawtooth returns to baseline', () => {
    const noise = rng(11);
    const samples = trainingSamples(
      180,
      () => 4 * GiB + Math.abs(noise()) * 2 * GiB
    );
    expect(leakTrend([], samples, 0, settings).verdict).not.toBe('rising');
  });

  it('does not flag a model load at the start of a long cell', () => {
    const samples = trainingSamples(180, i =>
      i < 10 ? GiB + i * 300 * MiB : 4 * GiB
    );
    expect(leakTrend([], samples, 0, settings).verdict).not.toBe('rising');
  });
});
