/**
 * Between cells an idle kernel's agent sends nothing (issue 40: every
 * message to or from a kernel counts as its activity for idle cullers), so
 * the device's own figures, which move without the kernel (other processes'
 * memory, GPU-Util), come from the server's NVML reading
 * (`gpu-hygiene/kernels`' `devices`). This composes the sample the page
 * shows from the kernel's last sample (its own figures: the agent reports
 * them when they change) and the server's device figures, and says how old
 * what the gauge's popup and the panel show is (`ageNotes`); pure. A chunk of
 * its own (`server-devices-loader.ts`): the monitor loads it with the first
 * answer that has devices, or when a user opens the popup or the panel, so
 * it is not on JupyterLab's start path.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { formatIdle } from './analysis/format';
import type { IGpuProcess, IGpuProcesses, IHello, ISample } from './protocol';
import { GPU_PROCESSES_MAX_PER_DEVICE } from './protocol-constants';
import type { IServerDevices } from './server-kernel-types';

/**
 * A sample the page composed: the kernel's own figures from its agent's last
 * sample (`ownT`, seconds since the epoch), the device's `used`, `total` and
 * `utilization` from the server's NVML at `t` (the server's clock, which a
 * kernel the server sees shares). `source` is `server`; the
 * agent never sends one.
 */
export type IComposedSample = ISample & { source: 'server'; ownT: number };

/** Whether a sample was composed by the page from the server's reading. */
export function isComposed(sample: ISample): sample is IComposedSample {
  return (sample as Partial<IComposedSample>).source === 'server';
}

/**
 * Compose a sample from the kernel's last own one and the server's reading.
 *
 * @param last - the kernel's latest sample (an agent's, or one composed
 *   earlier: its own figures are carried on).
 * @param hello - the agent's hello (the kernel's devices and their uuids).
 * @param reading - the server's NVML reading (read at its `t`).
 * @returns the composed sample, or null when the server sees none of the
 *   kernel's devices (a gateway's kernel, another machine or pid namespace,
 *   no NVML on the server), when the kernel has no device, while a cell runs
 *   (`last.busy`: the agent's own samples flow then), or when the reading is
 *   not newer than `last`.
 */
export function composeSample(
  last: ISample,
  hello: IHello,
  reading: IServerDevices
): IComposedSample | null {
  const t = reading.t;
  if (last.busy || !(t > last.t) || last.devices.length === 0) {
    return null;
  }
  const byUuid = new Map(reading.devices.map(d => [d.uuid, d]));
  let matched = 0;
  const devices = last.devices.map(entry => {
    const uuid = hello.devices.find(d => d.index === entry.index)?.uuid;
    const server = uuid ? byUuid.get(uuid) : undefined;
    if (!server) {
      return entry;
    }
    matched++;
    return {
      ...entry,
      used: server.used ?? entry.used,
      total: server.total ?? entry.total,
      utilization: server.utilization ?? null
    };
  });
  if (matched === 0) {
    return null;
  }
  const ownT = isComposed(last) ? last.ownT : last.t;
  return { ...last, t, busy: false, devices, source: 'server', ownT };
}

/**
 * Whether the server reads every device of this kernel: then the page needs
 * nothing from the kernel between cells. False also before the first answer.
 */
export function serverSeesKernel(
  hello: IHello | null,
  reading: IServerDevices | undefined
): boolean {
  if (!hello || !reading || hello.devices.length === 0) {
    return false;
  }
  const uuids = new Set(reading.devices.map(d => d.uuid));
  return hello.devices.every(d => d.uuid !== null && uuids.has(d.uuid));
}

/**
 * The GPU's processes between cells, from the server's NVML reading: the
 * pids and bytes the server read at its `t`, each with the
 * kind, name, command line and user the agent's last list gave that pid
 * (null for a process that came since: the agent reads those after the next
 * cell, or when a user opens the panel where the server cannot see the
 * GPU). Composed only from an agent list whose pids are this machine's
 * (`namespace` host), and only for the devices the server sees.
 *
 * @returns the composed list, or null (no agent list, another namespace, no
 *   device matched, or not newer).
 */
export function composeGpuProcesses(
  last: IGpuProcesses | null,
  hello: IHello,
  reading: IServerDevices
): IGpuProcesses | null {
  const t = reading.t;
  if (!last || last.namespace !== 'host' || !(t > last.t)) {
    return null;
  }
  const byUuid = new Map(reading.devices.map(d => [d.uuid, d]));
  const known = new Map<number, IGpuProcess>();
  for (const device of last.devices) {
    for (const process of device.processes) {
      known.set(process.pid, process);
    }
  }
  let matched = 0;
  const devices = last.devices.map(device => {
    const uuid = hello.devices.find(d => d.index === device.index)?.uuid;
    const server = uuid ? byUuid.get(uuid) : undefined;
    if (!server) {
      return device;
    }
    matched++;
    const processes = server.processes
      .map(({ pid, used }): IGpuProcess => {
        const before = known.get(pid);
        return {
          pid,
          used,
          kind: before?.kind ?? 'compute',
          name: before?.name ?? null,
          cmdline: before?.cmdline ?? null,
          user: before?.user ?? null,
          self: pid === last.pid
        };
      })
      .sort(
        (a, b) =>
          Number(a.used === null) - Number(b.used === null) ||
          (b.used ?? 0) - (a.used ?? 0) ||
          a.pid - b.pid
      )
      .slice(0, GPU_PROCESSES_MAX_PER_DEVICE);
    return { index: device.index, processes };
  });
  return matched ? { ...last, t, devices } : null;
}

/** What {@link ageNotes} reads of a kernel's model (a `GpuKernelModel`). */
export interface IFiguresOf {
  readonly latestSample: ISample | null;
  readonly serverSeesDevices: boolean;
  readonly hello: IHello | null;
}

/** How old figures may be before the gauge and the panel say their age (ms). */
export const FIGURES_AGE_SHOWN_MS = 10_000;

/**
 * How old the figures shown are, where they are not live (issue 40: an idle
 * kernel's agent sends nothing): between cells the device's figures come
 * from the server and this kernel's own from its last report (sent when
 * they change); where the server cannot read the kernel's GPU, every figure
 * is as old as the kernel's last report. Nothing while a cell runs.
 *
 * @param now - ms since the epoch.
 */
export function ageNotes(
  model: IFiguresOf,
  now: number,
  trans: TranslationBundle
): string[] {
  const latest = model.latestSample;
  if (!latest || latest.busy) {
    return [];
  }
  const ago = (t: number) => formatIdle(Math.max(0, now / 1000 - t));
  if (isComposed(latest)) {
    return [
      trans.__(
        'Device figures read by the server %1 ago; this kernel’s own as of its last report, %2 ago (an idle kernel reports only a change).',
        ago(latest.t),
        ago(latest.ownT)
      )
    ];
  }
  if (
    !model.serverSeesDevices &&
    (model.hello?.devices.length ?? 0) > 0 &&
    now - latest.t * 1000 >= FIGURES_AGE_SHOWN_MS
  ) {
    return [
      trans.__(
        'Figures as of %1 ago: an idle kernel reports only a change of its own, and this server cannot read its GPU. Opening this view asked the kernel again.',
        ago(latest.t)
      )
    ];
  }
  return [];
}
