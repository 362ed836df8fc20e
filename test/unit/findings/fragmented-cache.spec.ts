import {
  fragmentedCacheRule,
  FRAGMENTED_WARN_BYTES
} from '../../../src/analysis/findings/fragmented-cache';
import { findingsToToast } from '../../../src/notifications/finding-toast';
import type { IAllocator, IAllocatorDevice } from '../../../src/protocol';
import { c01Inventory } from '../fixtures';
import { facts, MiB, trans } from './helpers';

function device(
  inactiveSplit: number,
  reserved: number,
  index = 0
): IAllocatorDevice {
  return {
    index,
    reserved,
    allocated: reserved - inactiveSplit - 64 * MiB,
    active: reserved - inactiveSplit - 64 * MiB,
    inactiveSplit,
    releasable: 64 * MiB,
    segments: 10,
    allocRetries: 0
  };
}

function withAllocator(allocator: IAllocator | null) {
  return facts({ ...c01Inventory(), allocator });
}

describe('fragmented-cache', () => {
  it('reports inactive split blocks as fragmentation, info below the warning size', () => {
    const [finding] = fragmentedCacheRule(
      withAllocator({
        expandableSegments: false,
        devices: [device(96 * MiB, 2048 * MiB)]
      })
    );
    expect(finding).toMatchObject({
      kind: 'fragmented-cache',
      id: 'fragmented-cache',
      severity: 'info',
      subject: 'cuda:0',
      bytes: { 'cuda:0': 96 * MiB },
      fix: { kind: 'restart', bytes: { 'cuda:0': 96 * MiB } }
    });
    expect(finding.explain(trans)).toBe(
      "96.0 MiB of PyTorch's cache is fragmented: empty_cache() cannot return it while these tensors are alive; for the next kernel, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it."
    );
    expect(finding.evidence).toEqual([
      'cuda:0: inactive_split 96.0 MiB, reserved 2.0 GiB, releasable 64.0 MiB'
    ]);
  });

  it('a warning from 256 MiB that are 10 % of reserved, with a toast text within 140 characters', () => {
    const [finding] = fragmentedCacheRule(
      withAllocator({
        expandableSegments: false,
        devices: [device(FRAGMENTED_WARN_BYTES, 2048 * MiB)]
      })
    );
    expect(finding.severity).toBe('warning');
    const short = finding.short!(trans);
    expect(short.length).toBeLessThanOrEqual(140);
    expect(short).toBe(
      "256.0 MiB of PyTorch's cache is fragmented (empty_cache() can't return it); next kernel: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    );
    expect(findingsToToast([finding], { toastMinMiB: 1 })).toEqual([finding]);
  });

  it('256 MiB of a 4 GiB cache (under 10 %) stays an info', () => {
    const [finding] = fragmentedCacheRule(
      withAllocator({
        expandableSegments: false,
        devices: [device(300 * MiB, 4096 * MiB)]
      })
    );
    expect(finding.severity).toBe('info');
  });

  it('several devices: one finding, bytes per device', () => {
    const [finding] = fragmentedCacheRule(
      withAllocator({
        expandableSegments: false,
        devices: [device(1 * MiB, 100 * MiB, 0), device(40 * MiB, 400 * MiB, 1)]
      })
    );
    expect(finding.bytes).toEqual({ 'cuda:1': 40 * MiB });
    expect(finding.subject).toBe('cuda:1');
  });

  it('nothing with expandable segments, without CUDA, or below 8 MiB', () => {
    expect(
      fragmentedCacheRule(
        withAllocator({
          expandableSegments: true,
          devices: [device(512 * MiB, 2048 * MiB)]
        })
      )
    ).toEqual([]);
    expect(fragmentedCacheRule(withAllocator(null))).toEqual([]);
    expect(fragmentedCacheRule(facts(c01Inventory()))).toEqual([]);
    expect(fragmentedCacheRule(facts(null))).toEqual([]);
    expect(
      fragmentedCacheRule(
        withAllocator({
          expandableSegments: false,
          devices: [device(4 * MiB, 2048 * MiB)]
        })
      )
    ).toEqual([]);
  });
});
