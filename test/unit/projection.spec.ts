import { nullTranslator } from '@jupyterlab/translation';
import { nextExecutionCount } from '../../src/analysis/cells/cell-history';
import { formatTimeLeft } from '../../src/analysis/format';
import {
  PROJECTION_HORIZON_S,
  projectFull,
  roomOf
} from '../../src/analysis/memory/projection';
import type { ILeakTrend } from '../../src/analysis/memory/leak-trend';
import { describeLeak } from '../../src/notifications/text';
import { epochMarks, projectionLine } from '../../src/panel/chart-marks';
import type { IDeviceSample, ISample } from '../../src/protocol';
import { deviceSample } from './leak-shape-cells';

const GiB = 2 ** 30;
const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

function device(overrides: Partial<IDeviceSample>): IDeviceSample {
  return {
    index: 0,
    used: 20 * GiB,
    total: 80 * GiB,
    process: 20 * GiB,
    allocated: 16 * GiB,
    reserved: 18 * GiB,
    cached: 2 * GiB,
    nonTorch: 2 * GiB,
    processHidden: false,
    ...overrides
  };
}

/** A climb inside the running cell: 1 GiB a minute from a floor of 10 GiB at t = 1060. */
function climbing(overrides: Partial<ILeakTrend> = {}): ILeakTrend {
  return {
    verdict: 'rising',
    basis: 'samples',
    device: 0,
    slope: GiB / 60,
    rate: GiB,
    r2: 0.98,
    points: 60,
    intercept: 0,
    executionCount: null,
    shape: 'ramp',
    since: 1000,
    floor: { t: 1060, bytes: 10 * GiB },
    interval: null,
    cellStart: 1000,
    ...overrides
  };
}

/** Busy samples, one a second up to t = 1060, allocated `allocated(t)`; the last one's device figures from `last`. */
function samples(
  allocated: (t: number) => number,
  last: Partial<IDeviceSample> = {}
): ISample[] {
  const out: ISample[] = [];
  for (let t = 1000; t <= 1060; t++) {
    const a = allocated(t);
    out.push(deviceSample(t, t - 999, true, a, a + GiB));
  }
  const latest = out[out.length - 1];
  latest.devices = [device(last)];
  return out;
}

describe('roomOf', () => {
  it('is what the device has free plus this kernel’s cache, or what the cap leaves', () => {
    expect(roomOf(device({}))).toEqual({ bytes: 62 * GiB, bound: 'device' });
    expect(roomOf(device({ limit: 40 * GiB }))).toEqual({
      bytes: 24 * GiB,
      bound: 'limit'
    });
    expect(roomOf(device({ limit: 90 * GiB }))?.bound).toBe('device');
    // no NVML: only a cap tells
    expect(roomOf(device({ used: null, total: null }))).toBeNull();
    expect(
      roomOf(device({ used: null, total: null, limit: 20 * GiB }))
    ).toEqual({ bytes: 4 * GiB, bound: 'limit' });
  });
});

describe('projectFull', () => {
  it('times the room above the sawtooth’s recent top at the floor’s rate', () => {
    // allocated at the last sample 16 GiB + 62 GiB of room = 78 GiB capacity;
    // the sawtooth's top in the last 10 s: 18 GiB
    const s = samples(t => (t === 1055 ? 18 * GiB : 12 * GiB));
    const projection = projectFull(climbing(), s)!;
    expect(projection.capacity).toBe(78 * GiB);
    expect(projection.top).toBe(18 * GiB);
    expect(projection.seconds).toBeCloseTo(60 * 60); // 60 GiB at 1 GiB a minute
    expect(projection.bound).toBe('device');
  });

  it('uses the cap when it is the tighter bound', () => {
    const s = samples(() => 12 * GiB, { limit: 40 * GiB });
    const projection = projectFull(climbing(), s)!;
    expect(projection.bound).toBe('limit');
    expect(projection.capacity).toBe(40 * GiB);
    expect(projection.seconds).toBeCloseTo((40 - 16) * 60);
  });

  it('says nothing about time beyond two hours, and nothing for a trend across cells', () => {
    const s = samples(() => 12 * GiB);
    expect(
      projectFull(climbing({ slope: GiB / 3600, rate: GiB / 60 }), s)!.seconds
    ).toBeNull();
    expect(PROJECTION_HORIZON_S).toBe(7200);
    expect(projectFull(climbing({ basis: 'cells' }), s)).toBeNull();
    expect(projectFull(climbing({ verdict: 'steady' }), s)).toBeNull();
  });
});

describe('the running cell and the toast text', () => {
  it('the running cell is the kernel’s next count: the last cell’s plus one', () => {
    const mark = (executionCount: number | null) => ({
      executionCount,
      t: 0,
      postRun: 0,
      models: []
    });
    expect(nextExecutionCount([mark(4), mark(5), mark(null)])).toBe(6);
    expect(nextExecutionCount([mark(null)])).toBeNull();
    expect(nextExecutionCount([])).toBeNull();
  });

  it('formats the time left coarsely', () => {
    expect(formatTimeLeft(42)).toBe('40 s');
    expect(formatTimeLeft(17.4 * 60)).toBe('17 min');
    expect(formatTimeLeft(125 * 60)).toBe('2 h 05 min');
    expect(formatTimeLeft(null)).toBe('—');
  });

  it('says when the GPU or the cap is full, and nothing about time beyond the horizon', () => {
    const s = samples(() => 12 * GiB);
    const trend = climbing();
    expect(
      describeLeak(trend, trans, 1, null, {
        cell: 12,
        projection: projectFull(trend, s)
      })
    ).toBe(
      'PyTorch allocated climbs ~1.0 GiB per minute in cell [12]; at this rate the GPU is full in ~62 min. Tensors kept alive?'
    );
    const capped = samples(() => 12 * GiB, { limit: 40 * GiB });
    expect(
      describeLeak(trend, trans, 1, null, {
        cell: 12,
        projection: projectFull(trend, capped)
      })
    ).toContain('at this rate it reaches its allocator cap in ~24 min.');
    const slow = climbing({ slope: GiB / 3600, rate: GiB / 60 });
    expect(
      describeLeak(slow, trans, 1, null, {
        cell: null,
        projection: projectFull(slow, s)
      })
    ).toBe(
      'PyTorch allocated climbs ~17.1 MiB per minute in cell [*]. Tensors kept alive? e.g. losses.append(loss), not loss.item()'
    );
  });
});

describe('the chart’s projection line', () => {
  const range = { from: 1000, to: 1060 };

  it('runs from the floor at the fitted slope to where the GPU is full, when that is on the chart', () => {
    // 62 GiB of room above the top (16 GiB) at 128 GiB a minute: full 29 s after the floor
    const trend = climbing({ slope: (128 * GiB) / 60 });
    const s = samples(() => 12 * GiB);
    const projection = projectFull(trend, s)!;
    expect(projection.seconds).toBeCloseTo(60 * (62 / 128));
    const line = projectionLine(projection, range)!;
    const full = 1060 + projection.seconds!;
    expect(line.segment[0]).toEqual({ x: 1060, y: 10 * GiB });
    expect(line.segment[1].x).toBeCloseTo(full);
    expect(line.segment[1].y).toBeCloseTo(
      10 * GiB + ((128 * GiB) / 60) * projection.seconds!
    );
    expect(line.full).toBeCloseTo(full);
    expect(line.xMax).toBeCloseTo(full); // the x axis grows to show it
    expect(line.bound).toBe('device');
    expect(line.limit).toBeNull();
  });

  it('stops at the chart’s edge when the GPU fills later: a quarter of the span, at least 30 s ahead', () => {
    const projection = projectFull(
      climbing(),
      samples(() => 12 * GiB)
    )!;
    const line = projectionLine(projection, range)!;
    expect(line.segment[1].x).toBe(1060 + 30);
    expect(line.segment[1].y).toBeCloseTo(10 * GiB + (GiB / 60) * 30);
    expect(line.full).toBeNull(); // no marker: the label says ~62 min
    expect(line.seconds).toBeCloseTo(62 * 60);
    const long = projectionLine(projection, { from: 0, to: 1060 })!;
    expect(long.segment[1].x).toBe(1060 + 265);
  });

  it('draws the cap when the cap fills first; nothing without a time', () => {
    const capped = projectFull(
      climbing(),
      samples(() => 12 * GiB, { limit: 40 * GiB })
    );
    expect(projectionLine(capped, range)?.limit).toBe(40 * GiB);
    const slow = projectFull(
      climbing({ slope: GiB / 3600 }),
      samples(() => 12 * GiB)
    );
    expect(projectionLine(slow, range)).toBeNull();
    expect(projectionLine(null, range)).toBeNull();
  });
});

describe('epoch marks', () => {
  it('marks where each epoch began, 1-based, within the range', () => {
    const at = (t: number, epoch: number | null) => ({
      t,
      progress: epoch === null ? null : { epoch, epochs: 3 }
    });
    const s = [
      at(1, null),
      at(2, 0),
      at(3, 0),
      at(4, 1),
      at(5, 1),
      at(6, 2),
      at(7, null),
      at(8, 0) // a new training
    ];
    expect(epochMarks(s, { from: 0, to: 10 })).toEqual([
      { t: 2, epoch: 1 },
      { t: 4, epoch: 2 },
      { t: 6, epoch: 3 },
      { t: 8, epoch: 1 }
    ]);
    expect(epochMarks(s, { from: 3, to: 6 }).map(m => m.t)).toEqual([4, 6]);
    expect(epochMarks(s, { from: 0, to: 10 }, 2).map(m => m.t)).toEqual([6, 8]);
    // samples without progress (older agents): no marks
    expect(epochMarks([{ t: 1 }, { t: 2 }], { from: 0, to: 10 })).toEqual([]);
  });
});
