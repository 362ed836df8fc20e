import {
  cellMark,
  cellRows,
  ICellMark
} from '../../src/analysis/cells/cell-history';
import type { ISample } from '../../src/protocol';
import { c01Inventory, yolo } from './fixtures';

const MiB = 2 ** 20;

/** A sample at `t` with `allocated` MiB on cuda:0. */
function sample(t: number, allocated: number | null, busy = false): ISample {
  return {
    protocol: 2,
    type: 'sample',
    t,
    seq: Math.round(t * 10),
    busy,
    devices: [
      {
        index: 0,
        used: null,
        total: null,
        process: null,
        allocated: allocated === null ? null : allocated * MiB,
        reserved: null,
        cached: null,
        nonTorch: null,
        processHidden: false
      }
    ]
  };
}

function mark(
  executionCount: number | null,
  t: number,
  models: ICellMark['models'] = []
): ICellMark {
  return { executionCount, t, postRun: t - 0.01, models };
}

describe('cellRows', () => {
  it('finds start, duration, delta and peak of a long cell from busy samples', () => {
    const samples = [
      sample(100, 10),
      sample(101, 10),
      sample(101.2, 10, true), // pre_run_cell wakes the sampler
      sample(102.2, 300, true),
      sample(103.2, 900, true), // the peak
      sample(104.2, 250, true),
      sample(104.6, 200), // post_run_cell
      sample(105.6, 200)
    ];
    const marks = [mark(null, 99), mark(5, 104.61)];
    const [row] = cellRows(samples, marks, 0);
    expect(row.executionCount).toBe(5);
    expect(row.start).toBe(101.2);
    expect(row.durationMs).toBeCloseTo(3400);
    expect(row.before).toBe(10 * MiB);
    expect(row.after).toBe(200 * MiB);
    expect(row.delta).toBe(190 * MiB);
    expect(row.peak).toBe(900 * MiB);
    expect(row.samples).toBe(4);
    expect(row.created).toEqual([]);
  });

  it('handles a cell shorter than the sample interval', () => {
    const samples = [sample(100, 10), sample(101, 10), sample(102, 40)];
    const marks = [mark(null, 99), mark(1, 101.5)];
    const [row] = cellRows(samples, marks, 0);
    expect(row.start).toBeNull();
    expect(row.durationMs).toBeNull();
    expect(row.before).toBe(10 * MiB);
    expect(row.after).toBe(40 * MiB);
    expect(row.delta).toBe(30 * MiB);
  });

  it('lists the models a cell created, from consecutive inventories', () => {
    const first = cellMark({ ...c01Inventory(), models: [yolo()] });
    const second = cellMark(c01Inventory());
    const rows = cellRows([], [first, second], 0);
    // The first inventory has no predecessor: unknown.
    expect(rows[0].created).toBeNull();
    expect(rows[1].created?.map(m => m.id)).toEqual(['0x7f0000000002']);
    expect(rows[1].created?.[0].bytes).toBe(12_700_000);
  });

  it('skips inventories sent on request and gives nulls without a GPU', () => {
    const samples = [sample(100, null), sample(100.5, null, true)];
    const rows = cellRows(samples, [mark(null, 99), mark(3, 101)], 0);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      executionCount: 3,
      before: null,
      after: null,
      delta: null,
      peak: null
    });
  });

  it('keeps back-to-back cells apart (run all)', () => {
    const samples = [
      sample(100, 0),
      sample(100.1, 0, true), // cell 1 starts
      sample(101.1, 100, true),
      sample(101.5, 100, true), // cell 2 starts at once
      sample(102.5, 300, true),
      sample(102.9, 300)
    ];
    const marks = [mark(null, 99), mark(1, 101.4), mark(2, 102.8)];
    const [one, two] = cellRows(samples, marks, 0);
    expect(one.start).toBe(100.1);
    expect(one.before).toBe(0);
    expect(two.start).toBe(101.5);
    expect(two.peak).toBe(300 * MiB);
    expect(two.after).toBe(300 * MiB);
  });
});
