/**
 * The user's own idle kernels that held memory on the device of a CUDA
 * out-of-memory error (issue 12), joined by pid like the "On this GPU"
 * table: the OOM toast and its details offer to shut them down.
 */
import type { IGpuProcesses, IOom } from '../../protocol';
import type { IServerKernelsAnswer } from '../../server-kernel-types';
import type { IKernelInfo, IKnownKernel } from './gpu-process-types';
import { kernelOfPid } from './gpu-process-join';

/** One of the user's idle kernels that held memory on the device of an OOM. */
export interface IOomKernel {
  /** The kernel. */
  kernel: IKernelInfo;
  /** The pid NVML listed. */
  pid: number;
  /** Its bytes on the failed device (NVML; null when not reported). */
  bytes: number | null;
}

/** What the user's own idle kernels held on the device of a CUDA out-of-memory error. */
export interface IOomKernels {
  /** The idle kernels, largest first. */
  kernels: IOomKernel[];
  /** Their bytes together. */
  bytes: number;
  /** Bytes in use on the device when the cell failed (`total − free`, else the listed processes and this kernel). */
  inUse: number;
  /** Whether they held most of it (at least half). */
  mostly: boolean;
}

/**
 * The user's own idle kernels among the other processes of an `oom`
 * message (`processes`, NVML on the failed device), joined by pid like
 * {@link joinGpuProcesses}; null when there is none, or when the pids cannot
 * be joined (`namespace` `container`, from the kernel's last `gpuProcesses`).
 * "Mostly": together they held at least half of what was in use on the
 * device.
 */
export function oomIdleKernels(
  oom: IOom,
  context: {
    namespace: IGpuProcesses['namespace'] | null;
    kernelId: string;
    server: IServerKernelsAnswer | null;
    known: ReadonlyArray<IKnownKernel>;
    now: number;
  }
): IOomKernels | null {
  if (context.namespace === 'container') {
    return null;
  }
  const known = context.known.filter(k => k.id !== context.kernelId);
  const kernels: IOomKernel[] = [];
  for (const p of oom.processes) {
    const kernel = kernelOfPid(p.pid, context.server, known, context.now);
    if (
      kernel &&
      kernel.id !== context.kernelId &&
      kernel.state === 'idle' &&
      !kernels.some(k => k.kernel.id === kernel.id)
    ) {
      kernels.push({ kernel, pid: p.pid, bytes: p.used });
    }
  }
  if (!kernels.length) {
    return null;
  }
  kernels.sort((a, b) => (b.bytes ?? 0) - (a.bytes ?? 0));
  const bytes = kernels.reduce((sum, k) => sum + (k.bytes ?? 0), 0);
  const listed =
    oom.processes.reduce((sum, p) => sum + (p.used ?? 0), 0) +
    (oom.process ?? 0);
  const inUse =
    oom.total !== null && oom.free !== null
      ? Math.max(0, oom.total - oom.free)
      : listed;
  return { kernels, bytes, inUse, mostly: bytes > 0 && 2 * bytes >= inUse };
}
