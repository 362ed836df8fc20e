/**
 * Fragmented cache: free blocks of PyTorch's caching allocator that sit in
 * segments still holding a live tensor (`inactiveSplit` of the inventory's
 * `allocator` fact, from `torch.cuda.memory_stats`). `empty_cache()` only
 * returns segments with no live block, so this memory stays reserved while
 * those tensors live; `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`
 * (set before the kernel starts) avoids it. Not reported when expandable
 * segments are on (their free pages are returned).
 *
 * One finding for all devices, from {@link FRAGMENTED_MIN_BYTES} on one
 * device; warning from {@link FRAGMENTED_WARN_BYTES} that are also at least
 * {@link FRAGMENTED_WARN_SHARE} of that device's reserved memory, else info.
 * Fix: Restart kernel (the only thing that returns it from here; bytes: the
 * fragmented part).
 */
import type { IAllocatorDevice } from '../../protocol';
import { formatBytes, sumBytes } from '../format';
import type { FindingRule } from './types';

/**
 * Fragmentation below this (on every device) is not a finding (8 MiB): the
 * small pool alone keeps 2 MiB segments split by design.
 */
export const FRAGMENTED_MIN_BYTES = 8 * 2 ** 20;
/**
 * A warning from 256 MiB on one device (about the share of the CUDA context
 * itself, the smallest amount worth a restart)…
 */
export const FRAGMENTED_WARN_BYTES = 256 * 2 ** 20;
/** …that are also at least 10 % of what PyTorch reserves on that device. */
export const FRAGMENTED_WARN_SHARE = 0.1;

/** Whether one device's fragmentation is worth a warning. */
function severe(device: IAllocatorDevice): boolean {
  return (
    device.inactiveSplit >= FRAGMENTED_WARN_BYTES &&
    device.inactiveSplit >= FRAGMENTED_WARN_SHARE * device.reserved
  );
}

/** The fragmented-cache rule: at most one finding, bytes per CUDA device. */
export const fragmentedCacheRule: FindingRule = ({ inventory }) => {
  const allocator = inventory?.allocator;
  if (!allocator || allocator.expandableSegments) {
    return [];
  }
  const devices = allocator.devices.filter(
    d => d.inactiveSplit >= FRAGMENTED_MIN_BYTES
  );
  if (!devices.length) {
    return [];
  }
  const bytes: Record<string, number> = {};
  devices.forEach(d => (bytes[`cuda:${d.index}`] = d.inactiveSplit));
  const total = sumBytes(bytes);
  return [
    {
      kind: 'fragmented-cache',
      id: 'fragmented-cache',
      severity: devices.some(severe) ? 'warning' : 'info',
      subject: Object.keys(bytes).sort().join(', '),
      bytes,
      explain: trans =>
        trans.__(
          "%1 of PyTorch's cache is fragmented: empty_cache() cannot return it while these tensors are alive; for the next kernel, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it.",
          formatBytes(total)
        ),
      short: trans =>
        trans.__(
          "%1 of PyTorch's cache is fragmented (empty_cache() can't return it); next kernel: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
          formatBytes(total)
        ),
      // memory_stats' own terms, not translated (like holder paths)
      evidence: devices.map(
        d =>
          `cuda:${d.index}: inactive_split ${formatBytes(d.inactiveSplit)}, reserved ${formatBytes(d.reserved)}, releasable ${formatBytes(d.releasable)}`
      ),
      fix: { kind: 'restart', bytes }
    }
  ];
};
