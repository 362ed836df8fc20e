import { findLeak } from '../../src/analysis/memory/leak';
import { GpuKernelModel } from '../../src/model';
import type { IDeviceSample, ISample } from '../../src/protocol';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { c01Inventory } from './fixtures';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

function device(index: number, allocated: number | null): IDeviceSample {
  return {
    index,
    used: 2 * GiB,
    total: 80 * GiB,
    process: 2 * GiB,
    allocated,
    reserved: allocated === null ? null : allocated + 256 * MiB,
    cached: allocated === null ? null : 256 * MiB,
    nonTorch: null,
    processHidden: false
  };
}

/** A kernel that ran `cells` cells; `allocated(cell, device)` after each. */
function kernel(
  cells: number,
  allocated: (cell: number, index: number) => number | null
): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: 'k1' });
  let t = 1_000;
  let seq = 0;
  const sample = (cell: number, busy: boolean): ISample => ({
    protocol: 2,
    type: 'sample',
    t: (t += 0.5),
    seq: ++seq,
    busy,
    devices: [0, 1].map(i => device(i, allocated(cell, i)))
  });
  for (let cell = 0; cell < cells; cell++) {
    model.apply(sample(cell, true));
    model.apply({
      ...c01Inventory(),
      models: [],
      t: (t += 0.1),
      durationMs: 1,
      executionCount: cell + 1
    });
    model.apply(sample(cell, false));
    t += 5;
  }
  return model;
}

describe('findLeak', () => {
  it('finds the first device that climbs, skipping devices without torch figures', () => {
    const model = kernel(6, (cell, i) =>
      i === 0 ? null : GiB + cell * 64 * MiB
    );
    const trend = findLeak(model, DEFAULT_SETTINGS);
    expect(trend?.verdict).toBe('rising');
    expect(trend?.device).toBe(1);
    expect(trend?.basis).toBe('cells');
    expect(trend?.rate).toBeCloseTo(64 * MiB, -3);
  });

  it('is null when no device climbs, and before the first sample', () => {
    expect(
      findLeak(
        kernel(6, () => GiB),
        DEFAULT_SETTINGS
      )
    ).toBeNull();
    expect(
      findLeak(new GpuKernelModel({ kernelId: 'k2' }), DEFAULT_SETTINGS)
    ).toBeNull();
  });

  it('follows leakMinPoints', () => {
    const model = kernel(6, (cell, i) => GiB + cell * 64 * MiB);
    expect(findLeak(model, DEFAULT_SETTINGS)?.device).toBe(0);
    expect(
      findLeak(model, { ...DEFAULT_SETTINGS, leakMinPoints: 7 })
    ).toBeNull();
  });
});
