/**
 * The facts the GPU-process join needs, read from the monitor: the other
 * kernels the browser has agents in (their `hello.pid`, notebook, status and
 * last cell) and the server's kernel list. The gauge, the VRAM panel, the
 * Shut down command and the OOM toast all join through here, so they agree.
 */
import { joinGpuProcesses } from './analysis/processes/gpu-process-join';
import {
  IGpuProcessesJoin,
  IKernelInfo,
  IKnownKernel
} from './analysis/processes/gpu-process-types';
import {
  IOomKernels,
  oomIdleKernels
} from './analysis/processes/oom-idle-kernels';
import type { GpuKernelModel } from './model';
import type { IOom } from './protocol';
import type { IGpuMonitor } from './tokens';

/**
 * When a kernel last ended a cell (its latest inventory after a cell), else
 * its first sample (the agent's start), seconds since the epoch; null when
 * neither is known.
 */
export function idleSinceOf(model: GpuKernelModel): number | null {
  for (let i = model.cells.length - 1; i >= 0; i--) {
    if (model.cells[i].executionCount !== null) {
      return model.cells[i].t;
    }
  }
  return model.samples.length ? model.samples[0].t : null;
}

/** Every kernel the browser has an agent in that said hello (its pid). */
export function knownKernels(monitor: IGpuMonitor): IKnownKernel[] {
  const kernels: IKnownKernel[] = [];
  for (const model of monitor.models) {
    const pid = model.hello?.pid;
    if (pid === undefined || model.isDisposed) {
      continue;
    }
    const context = monitor.panelFor(model)?.sessionContext;
    kernels.push({
      id: model.kernelId,
      pid,
      path: context?.path || null,
      status: context?.session?.kernel?.status ?? null,
      idleSince: idleSinceOf(model)
    });
  }
  return kernels;
}

/**
 * The processes on `model`'s GPUs as its agent last listed them, joined with
 * the server's kernels and the kernels the browser knows; null before the
 * agent listed any (no NVML, an older agent).
 */
export function gpuProcessesOf(
  model: GpuKernelModel,
  monitor: IGpuMonitor,
  now: number = Date.now()
): IGpuProcessesJoin | null {
  const processes = model.gpuProcesses;
  if (!processes) {
    return null;
  }
  return joinGpuProcesses({
    processes,
    kernelId: model.kernelId,
    server: monitor.serverKernels.answer,
    known: knownKernels(monitor),
    now
  });
}

/** The user's idle kernels on the device of `model`'s OOM (see `oomIdleKernels`). */
export function oomKernelsOf(
  model: GpuKernelModel,
  oom: IOom,
  monitor: IGpuMonitor,
  now: number = Date.now()
): IOomKernels | null {
  return oomIdleKernels(oom, {
    namespace: model.gpuProcesses?.namespace ?? null,
    kernelId: model.kernelId,
    server: monitor.serverKernels.answer,
    known: knownKernels(monitor),
    now
  });
}

/**
 * A kernel of the server on the GPUs, as the current kernel's agent sees it
 * (else the first other agent that lists its process): its bytes over all
 * devices (`known`: NVML reported a figure on every device), and what the
 * join says of it (idle time); null when no agent lists its process.
 */
export function kernelOnGpu(
  monitor: IGpuMonitor,
  kernelId: string,
  now: number = Date.now()
): { bytes: number; known: boolean; kernel: IKernelInfo | null } | null {
  const models = [
    ...(monitor.currentModel ? [monitor.currentModel] : []),
    ...monitor.models.filter(m => m !== monitor.currentModel)
  ];
  for (const model of models) {
    const join = gpuProcessesOf(model, monitor, now);
    const row = join?.rows.find(
      r =>
        r.kernel?.id === kernelId ||
        (r.kind === 'this-kernel' && model.kernelId === kernelId)
    );
    if (row) {
      return {
        bytes: row.total,
        known: row.unknown.length === 0,
        kernel: row.kernel
      };
    }
  }
  return null;
}
