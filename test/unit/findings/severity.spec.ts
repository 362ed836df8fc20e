import { findings } from '../../../src/analysis/findings';
import {
  deviceCapacity,
  faultSeverity,
  warnBytes,
  WARN_MIN_BYTES
} from '../../../src/analysis/findings/severity';
import type { ISample } from '../../../src/protocol';
import { gpuSample, held, yolo } from '../fixtures';
import { facts, inventoryOf, MiB } from './helpers';

const GiB = 1024 * MiB;

/** A sample of one GPU of `vram` bytes, and `ram` bytes the kernel may use. */
function sample(vram: number, ram: number | null = null): ISample {
  return {
    ...gpuSample(vram / 2, vram),
    ...(ram !== null ? { ram: { rss: GiB, total: ram } } : {})
  };
}

describe('one severity scale (issue 28, item 5)', () => {
  it('weighs the bytes against the device: 0.5 % of it, at least 64 MiB', () => {
    const h100 = { inventory: null, sample: sample(80 * GiB), hello: null };
    expect(deviceCapacity('cuda:0', h100)).toBe(80 * GiB);
    expect(warnBytes('cuda:0', h100)).toBe(0.005 * 80 * GiB);
    expect(faultSeverity({ 'cuda:0': 409 * MiB }, h100)).toBe('info');
    expect(faultSeverity({ 'cuda:0': 410 * MiB }, h100)).toBe('warning');
    const small = { inventory: null, sample: sample(8 * GiB), hello: null };
    expect(warnBytes('cuda:0', small)).toBe(WARN_MIN_BYTES);
    expect(faultSeverity({ 'cuda:0': 64 * MiB }, small)).toBe('warning');
    // an unknown GPU: the floor; another device index of the same sample: unknown too
    expect(warnBytes('cuda:1', h100)).toBe(WARN_MIN_BYTES);
  });

  it('weighs RAM against what the kernel may use; without that figure RAM never warns', () => {
    const ram = {
      inventory: null,
      sample: sample(8 * GiB, 32 * GiB),
      hello: null
    };
    expect(deviceCapacity('cpu', ram)).toBe(32 * GiB);
    expect(faultSeverity({ cpu: 163 * MiB }, ram)).toBe('info');
    expect(faultSeverity({ cpu: 164 * MiB }, ram)).toBe('warning');
    const older = { inventory: null, sample: sample(8 * GiB), hello: null };
    expect(faultSeverity({ cpu: 64 * GiB }, older)).toBe('info');
  });

  it('is the same for every kind: a stale model and a traceback of equal bytes', () => {
    for (const [bytes, expected] of [
      [12 * MiB, 'info'],
      [256 * MiB, 'warning']
    ] as const) {
      const stale = yolo({
        bytes: { 'cuda:0': bytes },
        holders: [held('output', 'Out[2]')],
        stale: true
      });
      const onTraceback = yolo({
        id: '0x7f0000000099',
        order: 9,
        bytes: { 'cuda:0': bytes },
        holders: [held('traceback', 'last traceback (fit)')],
        stale: true
      });
      const list = findings({
        ...facts(inventoryOf([stale, onTraceback])),
        sample: sample(24 * GiB) // 0.5 %: 122.9 MiB
      });
      const severities = list
        .filter(f => f.kind !== 'cuda-context')
        .map(f => f.severity);
      expect(severities.length).toBeGreaterThan(1);
      expect(new Set(severities)).toEqual(new Set([expected]));
    }
  });
});
