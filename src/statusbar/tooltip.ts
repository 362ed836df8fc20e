/**
 * The gauge tooltip's lines for the devices: per device, NVML's figures,
 * this kernel's bands (in use by tensors, cached by PyTorch, CUDA context
 * and libraries) and what the user's other kernels and other processes
 * hold there. Pure functions of a kernel model (`state.ts` assembles the
 * tooltip).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { loadedFindings } from '../analysis/findings/rules-loader';
import { IMemoryBands, memoryBands } from '../analysis/memory/bands';
import { formatBytes } from '../analysis/format';
import { deviceKey } from '../analysis/processes/gpu-process-join';
import {
  IDeviceTotals,
  IGpuProcessesJoin
} from '../analysis/processes/gpu-process-types';
import type { GpuKernelModel } from '../model';
import type { IAllocatorDevice, IDeviceSample, IModelInfo } from '../protocol';

/** Bands of the kernel's memory below which the "not a leak" note is not worth a line. */
const NOTE_MIN_BYTES = 64 * 2 ** 20;

/**
 * The tooltip lines about the rest of a device (NVML's process list joined
 * with this server's kernels): "Your other kernels: 8.0 GiB" and "Other
 * processes: 3.0 GiB (2)"; in a container, where no pid can be joined, one
 * line for all processes. None when there is nothing else on the device.
 *
 * @param server - whether the server's kernel list was available (without
 *   it, the user's kernels cannot be told from other processes).
 */
export function otherProcessLines(
  totals: IDeviceTotals | undefined,
  server: boolean,
  trans: TranslationBundle
): string[] {
  if (!totals) {
    return [];
  }
  const lines: string[] = [];
  if (totals.unattributedCount > 0) {
    lines.push(
      trans.__(
        'Processes on this GPU: %1 (%2), attribution unavailable in this container',
        formatBytes(totals.unattributedBytes),
        totals.unattributedCount
      )
    );
  }
  if (totals.kernelCount > 0) {
    lines.push(
      trans.__('Your other kernels: %1', formatBytes(totals.kernelBytes))
    );
  }
  if (totals.otherCount > 0) {
    lines.push(
      server
        ? trans.__(
            'Other processes: %1 (%2)',
            formatBytes(totals.otherBytes),
            totals.otherCount
          )
        : trans.__(
            'Other processes: %1 (%2); which are kernels of this server: unknown',
            formatBytes(totals.otherBytes),
            totals.otherCount
          )
    );
  }
  return lines;
}

/**
 * The heading of a device: its NVML name and CUDA index, and nvidia-smi's
 * number when CUDA_VISIBLE_DEVICES makes them differ.
 */
function deviceHeading(
  model: GpuKernelModel,
  index: number,
  trans: TranslationBundle
): string {
  const info = model.hello?.devices.find(d => d.index === index);
  const name = info?.name ?? `GPU ${index}`;
  return info && info.nvmlIndex !== index
    ? trans.__('%1 (cuda:%2, nvidia-smi GPU %3)', name, index, info.nvmlIndex)
    : trans.__('%1 (cuda:%2)', name, index);
}

/** The tooltip line of this kernel's process: NVML's figure, or why there is none. */
function processLine(device: IDeviceSample, trans: TranslationBundle): string {
  if (device.processHidden) {
    return trans.__(
      'This kernel: NVML does not see this kernel’s process (container pid namespace); the figures below come from torch’s counters'
    );
  }
  if (device.process === null) {
    return trans.__(
      'This kernel: not listed by NVML (no CUDA context yet, or the kernel’s container hides its pid)'
    );
  }
  return trans.__(
    'This kernel: %1 (NVML, includes the CUDA context)',
    formatBytes(device.process)
  );
}

/** Cached bytes above what empty_cache() returns from which the cache line says so (1 MiB). */
const FRAGMENTED_MIN_BYTES = 2 ** 20;

/**
 * The tooltip lines of a device's bands: in use by tensors, cached by
 * PyTorch, CUDA context and libraries. `allocator`: the device's allocator
 * statistics from the latest inventory, used only when they describe the
 * same state as the sample (same reserved bytes): the cache is then split
 * into what `empty_cache()` returns (`releasable`) and what partly used
 * blocks keep (issue 28: "released by empty_cache()" was said of a cache
 * whose releasable figure was 0).
 */
function bandLines(
  bands: IMemoryBands,
  allocator: IAllocatorDevice | null,
  trans: TranslationBundle
): string[] {
  const lines: string[] = [];
  if (bands.allocated === null) {
    lines.push(
      trans.__(
        'PyTorch: no allocator figures (torch not imported or CUDA not initialised in this kernel)'
      )
    );
  } else {
    lines.push(
      trans.__(
        'In use by tensors: %1 (PyTorch allocated)',
        formatBytes(bands.allocated)
      )
    );
    const kept =
      allocator && bands.cached !== null
        ? Math.max(0, bands.cached - allocator.releasable)
        : 0;
    if (bands.cached !== null && kept >= FRAGMENTED_MIN_BYTES) {
      lines.push(
        trans.__(
          'Cached by PyTorch: %1 — free for this kernel; empty_cache() returns %2 of it, partly used blocks keep %3 (fragmentation)',
          formatBytes(bands.cached),
          formatBytes(bands.cached - kept),
          formatBytes(kept)
        )
      );
    } else if (bands.cached !== null) {
      lines.push(
        trans.__(
          'Cached by PyTorch: %1 — free for this kernel, released by empty_cache()',
          formatBytes(bands.cached)
        )
      );
    }
  }
  if (bands.nonTorch !== null) {
    lines.push(
      trans.__(
        'CUDA context and libraries: %1 — freed only by restarting the kernel',
        formatBytes(bands.nonTorch)
      )
    );
  }
  return lines;
}

/**
 * Whether the "not a leak" note is true and worth a line: no finding holds
 * bytes on the device (`heldByFindings`: their bytes there; null while the
 * findings' rules have not loaded, when nothing is claimed), no stale model
 * on it, and more cache and context than live tensors (at least
 * {@link NOTE_MIN_BYTES}).
 */
function notALeak(
  bands: IMemoryBands,
  staleBytes: number,
  heldByFindings: number | null
): boolean {
  const idle = (bands.cached ?? 0) + (bands.nonTorch ?? 0);
  return (
    bands.allocated !== null &&
    heldByFindings === 0 &&
    staleBytes === 0 &&
    idle > bands.allocated &&
    idle >= NOTE_MIN_BYTES
  );
}

/**
 * The allocator statistics of the latest inventory for `device`, when they
 * describe the state the sample shows (the same reserved bytes), else null.
 */
function sameState(
  model: GpuKernelModel,
  device: IDeviceSample
): IAllocatorDevice | null {
  const found = model.inventory?.allocator?.devices.find(
    a => a.index === device.index
  );
  return found && found.reserved === device.reserved ? found : null;
}

/**
 * Findings whose bytes are not memory this kernel holds past its use: the
 * CUDA context (the very memory the note is about) and child processes
 * (theirs, not the kernel's).
 */
const NOT_HELD = new Set(['cuda-context', 'child-processes']);

/**
 * Bytes the kernel's findings hold, per device (`"cuda:0"`: bytes), or null
 * while the findings' rules have not loaded (issue 28: "not a leak" is said
 * only where no finding holds bytes).
 */
function findingBytes(model: GpuKernelModel): Record<string, number> | null {
  const rules = loadedFindings();
  if (!rules) {
    return null;
  }
  const out: Record<string, number> = {};
  for (const finding of rules.findings(rules.factsOf(model))) {
    if (NOT_HELD.has(finding.kind)) {
      continue;
    }
    for (const [device, bytes] of Object.entries(finding.bytes)) {
      out[device] = (out[device] ?? 0) + bytes;
    }
  }
  return out;
}

/**
 * "GPU utilisation: 87 % (NVML, all processes), this kernel 80 %": whether
 * the device computes at all, and this kernel's share of it (the sample's
 * `utilization` and `processUtilization`); null where NVML gave none (an
 * older agent, a MIG instance).
 */
export function utilizationLine(
  device: IDeviceSample,
  trans: TranslationBundle
): string | null {
  const all = device.utilization;
  if (all === null || all === undefined) {
    return null;
  }
  const mine = device.processUtilization;
  return mine === null || mine === undefined
    ? trans.__('GPU utilisation: %1 % (NVML, all processes)', Math.round(all))
    : trans.__(
        'GPU utilisation: %1 % (NVML, all processes), this kernel %2 %',
        Math.round(all),
        Math.round(mine)
      );
}

/**
 * Tooltip lines for one device: NVML's device figure, this kernel's share and
 * its bands (in use by tensors, cached by PyTorch, CUDA context and
 * libraries), so that memory which is only cache and context does not read as
 * a leak. The "not a leak" note needs no finding holding bytes on the device,
 * no stale model on it, and more cache and context than live tensors.
 */
function deviceLines(
  device: IDeviceSample,
  heading: string,
  staleBytes: number,
  heldByFindings: number | null,
  allocator: IAllocatorDevice | null,
  others: string[],
  trans: TranslationBundle
): string[] {
  const lines = [heading];
  if (device.used !== null && device.total !== null) {
    lines.push(
      trans.__(
        'Device used: %1 of %2 (NVML, all processes)',
        formatBytes(device.used),
        formatBytes(device.total)
      )
    );
  }
  const utilization = utilizationLine(device, trans);
  if (utilization !== null) {
    lines.push(utilization);
  }
  lines.push(processLine(device, trans));
  const bands = memoryBands(device);
  lines.push(...bandLines(bands, allocator, trans));
  if (notALeak(bands, staleBytes, heldByFindings)) {
    lines.push(
      trans.__(
        'Not a leak: most of this kernel’s VRAM is PyTorch’s reusable cache and the CUDA context, not live tensors.'
      )
    );
  }
  lines.push(...others);
  return lines;
}

/** One device's part of the breakdown: its heading and its lines. */
export interface IDeviceSection {
  /** NVML name and CUDA index, e.g. "NVIDIA H200 (cuda:0)". */
  heading: string;
  /** NVML's figures, this kernel's bands, other processes on the device. */
  lines: string[];
}

/**
 * The breakdown of every device the gauge tells, one section each: the
 * gauge's `device`, then each other one where this kernel holds memory,
 * each with what the user's other kernels and other processes hold there
 * (`join`).
 */
export function deviceSections(
  model: GpuKernelModel,
  device: IDeviceSample,
  models: ReadonlyArray<IModelInfo>,
  join: IGpuProcessesJoin | null,
  trans: TranslationBundle
): IDeviceSection[] {
  const others = (model.latestSample?.devices ?? []).filter(
    d =>
      d !== device &&
      ((d.process ?? 0) > 0 || (d.reserved ?? 0) > 0 || d.processHidden)
  );
  const held = findingBytes(model);
  return [device, ...others].map(d => {
    const heading = deviceHeading(model, d.index, trans);
    const lines = deviceLines(
      d,
      heading,
      models
        .filter(m => m.stale)
        .reduce((sum, m) => sum + (m.bytes[`cuda:${d.index}`] ?? 0), 0),
      held ? (held[`cuda:${d.index}`] ?? 0) : null,
      sameState(model, d),
      join
        ? otherProcessLines(join.totals[deviceKey(d.index)], join.server, trans)
        : [],
      trans
    );
    return { heading, lines: lines.slice(1) };
  });
}

/**
 * The tooltip lines of every device the gauge tells ({@link deviceSections}
 * flattened: each heading, then its lines).
 */
export function devicesLines(
  model: GpuKernelModel,
  device: IDeviceSample,
  models: ReadonlyArray<IModelInfo>,
  join: IGpuProcessesJoin | null,
  trans: TranslationBundle
): string[] {
  return deviceSections(model, device, models, join, trans).flatMap(s => [
    s.heading,
    ...s.lines
  ]);
}
