import {
  detectStairs,
  erodeFloor,
  floorLevels,
  floorWindows,
  IFloorPoint,
  windowWidth
} from '../../src/analysis/memory/floor';

const MiB = 2 ** 20;

/** Floor points one a second from `ys` (MiB), with a sawtooth `spread` MiB above each. */
function points(ys: number[], spread = 500): IFloorPoint[] {
  return ys.map((y, k) => ({
    t: 1000 + k,
    floor: y * MiB,
    peak: (y + spread) * MiB
  }));
}

const options = { minR2: 0.9, minSpan: 7.5, minStep: 8 * MiB };

describe('floorWindows', () => {
  it('takes the lowest value of each window in time, allocatedMin included', () => {
    const samples = [
      { t: 0, allocated: 500, low: 100 },
      { t: 0.5, allocated: 300, low: 200 },
      { t: 1.2, allocated: 900, low: 400 },
      { t: 3.1, allocated: 50, low: null }
    ];
    expect(floorWindows(samples, 1)).toEqual([
      { t: 0.5, floor: 100, peak: 500 },
      { t: 1.2, floor: 400, peak: 900 },
      { t: 3.1, floor: 50, peak: 50 } // no sample between 2 and 3: no window
    ]);
  });

  it('is one sample interval wide with the reads (at least 1 s), four without', () => {
    const at = (interval: number, low: number | null) =>
      Array.from({ length: 10 }, (_, i) => ({
        t: i * interval,
        allocated: 1,
        low
      }));
    expect(windowWidth(at(1, 1))).toBeCloseTo(1, 2);
    expect(windowWidth(at(0.25, 1))).toBe(1);
    expect(windowWidth(at(2, 1))).toBeCloseTo(2, 2);
    expect(windowWidth(at(1, null))).toBeCloseTo(4, 2);
    expect(windowWidth(at(0.25, null))).toBe(1);
  });
});

describe('erodeFloor', () => {
  it('lowers each window to the lowest of the next two, keeping steps up in place', () => {
    const eroded = erodeFloor(points([10, 90, 10, 10, 50, 50, 50, 80]));
    expect(eroded.map(p => p.floor / MiB)).toEqual([
      10, 10, 10, 10, 50, 50, 50, 80
    ]);
  });
});

describe('floorLevels', () => {
  it('starts a level where two points in a row leave the current one', () => {
    const levels = floorLevels(
      points([100, 102, 99, 300, 301, 100, 302, 305]),
      50 * MiB
    );
    expect(levels.map(l => [l.first, l.last, l.value / MiB])).toEqual([
      [0, 2, 100],
      [3, 7, 301.5] // the lone 100 is noise, left out
    ]);
    // a last point alone is not yet a level
    expect(floorLevels(points([100, 101, 400]), 50 * MiB)).toHaveLength(1);
  });
});

describe('detectStairs', () => {
  const epoch = (n: number, value: number) => Array(n).fill(value);

  it('finds two regular similar steps after a flat epoch: 490 MiB every 4 s', () => {
    const stairs = detectStairs(
      points([...epoch(4, 1500), ...epoch(4, 1990), ...epoch(4, 2480), 2480]),
      options
    );
    expect(stairs).not.toBeNull();
    expect(stairs!.steps).toBe(2);
    expect(stairs!.interval).toBe(4);
    expect((stairs!.slope * 60) / MiB).toBeCloseTo((490 * 60) / 4, 0);
    expect(stairs!.floor.bytes).toBe(2480 * MiB);
  });

  it('not for steps that stopped: the last level older than 1.5 intervals', () => {
    expect(
      detectStairs(
        points([...epoch(4, 1500), ...epoch(4, 1990), ...epoch(7, 2480)]),
        options
      )
    ).toBeNull();
  });

  it('not for a load at the cell start followed by one more step (the optimizer state)', () => {
    expect(
      detectStairs(points([0, ...epoch(7, 1500), ...epoch(3, 2000)]), options)
    ).toBeNull();
  });

  it('not for steps of very different sizes, nor irregular ones', () => {
    expect(
      detectStairs(
        points([...epoch(4, 1000), ...epoch(4, 1100), ...epoch(4, 2000), 2000]),
        options
      )
    ).toBeNull();
    expect(
      detectStairs(
        points([
          ...epoch(2, 1000),
          ...epoch(2, 1490),
          ...epoch(6, 1980),
          ...epoch(1, 2470),
          2470
        ]),
        options
      )
    ).toBeNull();
  });

  it('not while nothing trains (no sawtooth above the floor): a cell that loads one thing after another', () => {
    expect(
      detectStairs(
        points(
          [...epoch(4, 1500), ...epoch(4, 1990), ...epoch(4, 2480), 2480],
          0
        ),
        options
      )
    ).toBeNull();
  });

  it('not for a climb shorter than minSpan', () => {
    expect(
      detectStairs(
        points([...epoch(2, 1500), ...epoch(2, 1990), ...epoch(2, 2480)]),
        options
      )
    ).toBeNull();
  });
});
