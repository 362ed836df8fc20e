/**
 * The `gpuProcesses` message the processes' specs share: this kernel (k1,
 * pid 1000), another local kernel (k2, pid 2000), a stranger (pid 4242).
 */
import { gpuProcess, gpuProcessesMessage } from '../fixtures';

export const GiB = 2 ** 30;
export const MiB = 2 ** 20;
/** 2025-11-30T10:25:00Z: 25 minutes after the fixtures' lastActivity. */
export const NOW = Date.parse('2025-11-30T10:25:00.000Z');

/** This kernel (k1, pid 1000), another local kernel (k2, pid 2000), a stranger (pid 4242). */
export const message = () =>
  gpuProcessesMessage([
    gpuProcess({ pid: 2000, used: 8 * GiB, name: 'python' }),
    gpuProcess({ pid: 4242, used: 3 * GiB, user: 'bob' })
  ]);
