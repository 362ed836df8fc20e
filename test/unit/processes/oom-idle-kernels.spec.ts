/**
 * Issue 12: the user's own idle kernels on the device of a CUDA
 * out-of-memory error, joined by pid.
 */
import { oomIdleKernels } from '../../../src/analysis/processes/oom-idle-kernels';
import { oomMessage, serverAnswer, serverKernel } from '../fixtures';
import { GiB, NOW } from './process-messages';

describe('oomIdleKernels', () => {
  const context = {
    namespace: 'host' as const,
    kernelId: 'k1',
    server: serverAnswer([
      serverKernel({ id: 'k2', pid: 2000 }),
      serverKernel({ id: 'k3', pid: 3000, executionState: 'busy' })
    ]),
    known: [],
    now: NOW
  };

  it('names the idle kernels and says whether they held most of the device', () => {
    const oom = oomMessage({
      total: 80 * GiB,
      free: 0,
      process: 20 * GiB,
      processes: [
        { pid: 2000, used: 50 * GiB },
        { pid: 3000, used: 6 * GiB },
        { pid: 4242, used: 4 * GiB }
      ]
    });
    const found = oomIdleKernels(oom, context)!;
    expect(found.kernels.map(k => [k.kernel.id, k.bytes])).toEqual([
      ['k2', 50 * GiB]
    ]);
    expect(found).toMatchObject({
      bytes: 50 * GiB,
      inUse: 80 * GiB,
      mostly: true
    });
    const less = oomIdleKernels(
      {
        ...oom,
        processes: [{ pid: 2000, used: 10 * GiB }, ...oom.processes.slice(1)]
      },
      context
    )!;
    expect(less.mostly).toBe(false);
  });

  it('says nothing in a container, without idle kernels, or for this kernel', () => {
    const oom = oomMessage({ processes: [{ pid: 2000, used: 50 * GiB }] });
    expect(oomIdleKernels(oom, { ...context, namespace: 'container' })).toBe(
      null
    );
    expect(oomIdleKernels(oom, { ...context, kernelId: 'k2' })).toBe(null);
    expect(
      oomIdleKernels(
        oomMessage({ processes: [{ pid: 3000, used: 50 * GiB }] }),
        context
      )
    ).toBe(null);
  });
});
