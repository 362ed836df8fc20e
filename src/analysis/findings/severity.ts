/**
 * One severity scale for every fault (issue 28, item 5): a finding is a
 * warning when the bytes at stake on one device are a real share of what
 * that device holds — at least {@link WARN_SHARE} of it and at least
 * {@link WARN_MIN_BYTES} — whatever the kind. The device is the GPU for
 * `cuda:N` (NVML's total, from the sample or the hello) and the memory the
 * kernel may use for `cpu` (`sample.ram.total`: physical RAM or the cgroup
 * limit, agent 0.12.0). Kinds that state a fact rather than a fault (a
 * model the user still names, the CUDA context, a deliberate copy, a
 * holder the walk could not find) stay infos: their rules do not ask.
 */
import type { FindingSeverity, IFacts, PerDevice } from './types';

/** The smallest stake that is a warning on any device (64 MiB). */
export const WARN_MIN_BYTES = 64 * 2 ** 20;

/** The share of a device's memory from which a fault is a warning (0.5 %). */
export const WARN_SHARE = 0.005;

/**
 * The memory of a device, bytes: NVML's total of `cuda:N`, the kernel's
 * usable RAM for `cpu`, or null where the facts do not say (an older agent).
 */
export function deviceCapacity(device: string, facts: IFacts): number | null {
  if (device === 'cpu') {
    return facts.sample?.ram?.total ?? null;
  }
  const match = /^cuda:(\d+)$/.exec(device);
  if (!match) {
    return null;
  }
  const index = Number(match[1]);
  return (
    facts.sample?.devices.find(d => d.index === index)?.total ??
    facts.hello?.devices.find(d => d.index === index)?.total ??
    null
  );
}

/**
 * The bytes from which a fault on `device` is a warning: the larger of
 * {@link WARN_MIN_BYTES} and {@link WARN_SHARE} of its memory. Where a GPU's
 * memory is unknown, {@link WARN_MIN_BYTES}; where the RAM is unknown (an
 * agent before 0.12.0 sends none), never: RAM bytes cannot be weighed.
 */
export function warnBytes(device: string, facts: IFacts): number {
  const capacity = deviceCapacity(device, facts);
  if (capacity === null && device === 'cpu') {
    return Infinity;
  }
  return Math.max(WARN_MIN_BYTES, capacity ? capacity * WARN_SHARE : 0);
}

/**
 * The severity of a fault holding `bytes` (per device): a warning when on
 * some device it holds at least {@link warnBytes} of that device, else an
 * info.
 */
export function faultSeverity(
  bytes: PerDevice,
  facts: IFacts
): FindingSeverity {
  return Object.entries(bytes).some(
    ([device, value]) => value >= warnBytes(device, facts)
  )
    ? 'warning'
    : 'info';
}
