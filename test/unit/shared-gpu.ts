/**
 * One shared-GPU scenario for the "On this GPU" and OOM tests: this kernel
 * k1 (pid 1000) on an H200 that also holds the user's other kernel k2 (pid
 * 2000, 8 GiB, on notebook work/k2.ipynb) and bob's job (pid 4242, 3 GiB).
 */
import { GpuKernelModel } from '../../src/model';
import {
  gpuProcess,
  gpuProcessesMessage,
  gpuSample,
  h200Hello,
  OneModelMonitor,
  serverAnswer,
  serverKernel
} from './fixtures';

const GiB = 2 ** 30;

/** Kernel k1 (pid 1000) on an H200 that also holds k2 (pid 2000, 8 GiB) and bob's job (3 GiB). */
export function k1Model(): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: 'k1' });
  model.apply(
    h200Hello({ agentVersion: '0.4.0', python: '3.12.3', pid: 1000 })
  );
  model.apply(gpuSample(13 * GiB, 141 * GiB));
  model.apply(
    gpuProcessesMessage([
      gpuProcess({ pid: 2000, used: 8 * GiB, name: 'python' }),
      gpuProcess({
        pid: 4242,
        used: 3 * GiB,
        user: 'bob',
        cmdline: `python3 train.py ${'--flag '.repeat(30)}`
      })
    ])
  );
  return model;
}

/** The server runs k1 and k2, k2 on notebook work/k2.ipynb. */
export const answer = (): ReturnType<typeof serverAnswer> =>
  serverAnswer([
    serverKernel({ id: 'k1', pid: 1000, executionState: 'busy' }),
    serverKernel({ id: 'k2', pid: 2000 })
  ]);

export function monitorWith(model = k1Model()) {
  const monitor = new OneModelMonitor(model);
  monitor.serverKernels.set(answer());
  return { model, monitor };
}
