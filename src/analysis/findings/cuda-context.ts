/**
 * CUDA context and libraries: what this kernel holds on each device beyond
 * PyTorch's reserved memory (`nonTorch` of the latest sample: the CUDA
 * context, cuBLAS/cuDNN workspaces and kernels, other allocators). Freed
 * only by ending the process. Info; fix: Restart kernel.
 */
import { formatBytes, sumBytes } from '../format';
import type { FindingRule } from './types';

/** The cuda-context rule: at most one finding, bytes per device. */
export const cudaContextRule: FindingRule = ({ sample }) => {
  const bytes: Record<string, number> = {};
  for (const device of sample?.devices ?? []) {
    if (device.nonTorch !== null && device.nonTorch > 0) {
      bytes[`cuda:${device.index}`] = device.nonTorch;
    }
  }
  if (sumBytes(bytes) === 0) {
    return [];
  }
  const devices = Object.keys(bytes).sort();
  return [
    {
      kind: 'cuda-context',
      id: 'cuda-context',
      severity: 'info',
      subject: devices.join(', '),
      bytes,
      explain: trans =>
        trans.__(
          'CUDA context and libraries: %1 — freed only by restarting the kernel.',
          formatBytes(sumBytes(bytes))
        ),
      evidence: devices.map(d => `${d}: ${formatBytes(bytes[d])}`),
      fix: { kind: 'restart', bytes }
    }
  ];
};
