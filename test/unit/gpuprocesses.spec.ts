/**
 * Issue 12: who else is on the GPU. NVML's processes (the agent's
 * `gpuProcesses`) joined by pid with the server's kernels and with the
 * `hello.pid` of the kernels the browser knows.
 */
import {
  IKnownKernel,
  joinGpuProcesses,
  kernelLabel,
  oomIdleKernels,
  processesOnDevice
} from '../../src/analysis/processes/gpu-processes';
import { formatIdle } from '../../src/analysis/format';
import {
  gpuProcess,
  gpuProcessesMessage,
  oomMessage,
  serverAnswer,
  serverKernel
} from './fixtures';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
/** 2025-11-30T10:25:00Z: 25 minutes after the fixtures' lastActivity. */
const NOW = Date.parse('2025-11-30T10:25:00.000Z');

/** This kernel (k1, pid 1000), another local kernel (k2, pid 2000), a stranger (pid 4242). */
const message = () =>
  gpuProcessesMessage([
    gpuProcess({ pid: 2000, used: 8 * GiB, name: 'python' }),
    gpuProcess({ pid: 4242, used: 3 * GiB, user: 'bob' })
  ]);

describe('joinGpuProcesses', () => {
  it('host: this kernel, a kernel of this server (by its pid), another process', () => {
    const join = joinGpuProcesses({
      processes: message(),
      kernelId: 'k1',
      server: serverAnswer([
        serverKernel({ id: 'k1', pid: 1000 }),
        serverKernel({ id: 'k2', pid: 2000 })
      ]),
      known: [],
      now: NOW
    });
    expect(join.attributed).toBe(true);
    expect(join.server).toBe(true);
    expect(join.rows.map(r => [r.pid, r.kind, r.total])).toEqual([
      [2000, 'your-kernel', 8 * GiB],
      [4242, 'other-process', 3 * GiB],
      [1000, 'this-kernel', 2 * GiB]
    ]);
    const yours = join.rows[0];
    expect(yours.bytes).toEqual({ 'cuda:0': 8 * GiB });
    expect(yours.kernel).toMatchObject({
      id: 'k2',
      spec: 'python3',
      notebook: 'work/k2.ipynb',
      state: 'idle',
      idleSeconds: 25 * 60,
      idleSource: 'server',
      connections: 1,
      inServer: true,
      matchedBy: 'server'
    });
    expect(kernelLabel(yours.kernel!)).toBe('k2.ipynb');
    const other = join.rows[1];
    expect(other).toMatchObject({
      name: 'python3',
      user: 'bob',
      cmdline: 'python3 train.py --epochs 100',
      kernel: null
    });
    expect(join.totals['cuda:0']).toEqual({
      otherBytes: 3 * GiB,
      otherCount: 1,
      kernelBytes: 8 * GiB,
      kernelCount: 1,
      unattributedBytes: 0,
      unattributedCount: 0
    });
  });

  it('container: nothing is joined, not even a pid that looks like a kernel', () => {
    const processes = message();
    processes.namespace = 'container';
    processes.devices[0].processes[0].self = false; // the agent cannot tell
    const join = joinGpuProcesses({
      processes,
      kernelId: 'k1',
      server: serverAnswer([serverKernel({ id: 'k2', pid: 2000 })]),
      known: [
        { id: 'k2', pid: 2000, path: 'b.ipynb', status: 'idle', idleSince: 0 }
      ],
      now: NOW
    });
    expect(join.attributed).toBe(false);
    expect(join.rows.every(r => r.kind === 'unattributed')).toBe(true);
    expect(join.rows.every(r => r.kernel === null)).toBe(true);
    expect(join.totals['cuda:0']).toMatchObject({
      otherCount: 0,
      kernelCount: 0,
      unattributedBytes: 13 * GiB,
      unattributedCount: 3
    });
  });

  it('gateway: a kernel the server has no pid for is matched by the hello.pid the browser knows', () => {
    const known: IKnownKernel[] = [
      // This kernel is skipped (its own row comes from `self`).
      { id: 'k1', pid: 1000, path: 'a.ipynb', status: 'busy', idleSince: 0 },
      {
        id: 'k2',
        pid: 2000,
        path: 'b.ipynb',
        status: 'idle',
        idleSince: NOW / 1000 - 600
      }
    ];
    const join = joinGpuProcesses({
      processes: message(),
      kernelId: 'k1',
      server: serverAnswer(
        [
          serverKernel({ id: 'k1', pid: null }),
          serverKernel({ id: 'k2', pid: null })
        ],
        true
      ),
      known,
      now: NOW
    });
    const row = join.rows.find(r => r.pid === 2000)!;
    expect(row.kind).toBe('remote-kernel');
    expect(row.kernel).toMatchObject({
      id: 'k2',
      notebook: 'work/k2.ipynb', // the server's session first
      matchedBy: 'hello',
      inServer: true,
      // the browser's last cell, not the server's last activity (which the
      // agent's own messages keep fresh)
      idleSeconds: 600,
      idleSource: 'cells'
    });
    expect(join.totals['cuda:0'].kernelBytes).toBe(8 * GiB);
    expect(join.rows.find(r => r.pid === 4242)!.kind).toBe('other-process');
  });

  it('without the server (404): a kernel the browser knows is still named, but not in the server', () => {
    const join = joinGpuProcesses({
      processes: message(),
      kernelId: 'k1',
      server: null,
      known: [
        {
          id: 'k2',
          pid: 2000,
          path: 'notes/b.ipynb',
          status: 'idle',
          idleSince: null
        }
      ],
      now: NOW
    });
    expect(join.server).toBe(false);
    const row = join.rows.find(r => r.pid === 2000)!;
    expect(row.kind).toBe('remote-kernel');
    expect(row.kernel).toMatchObject({
      notebook: 'notes/b.ipynb',
      inServer: false,
      spec: null,
      idleSeconds: null
    });
  });

  it('a kernel launched through a wrapper: the server pid is the wrapper, hello.pid the process NVML sees', () => {
    const join = joinGpuProcesses({
      processes: message(),
      kernelId: 'k1',
      server: serverAnswer([serverKernel({ id: 'k2', pid: 1999 })]),
      known: [
        { id: 'k2', pid: 2000, path: null, status: 'idle', idleSince: null }
      ],
      now: NOW
    });
    const row = join.rows.find(r => r.pid === 2000)!;
    expect(row.kind).toBe('your-kernel');
    expect(row.kernel).toMatchObject({ id: 'k2', matchedBy: 'hello' });
  });

  it('graphics + compute: one process listed twice on a device is one row of kind both, bytes once', () => {
    const processes = gpuProcessesMessage([
      gpuProcess({ pid: 77, kind: 'compute', used: 512 * MiB, name: 'Xorg' }),
      gpuProcess({ pid: 77, kind: 'graphics', used: 512 * MiB, name: 'Xorg' }),
      gpuProcess({ pid: 78, kind: 'graphics', used: null, name: 'gnome-shell' })
    ]);
    const join = joinGpuProcesses({
      processes,
      kernelId: 'k1',
      server: serverAnswer([]),
      known: [],
      now: NOW
    });
    const xorg = join.rows.find(r => r.pid === 77)!;
    expect(xorg).toMatchObject({
      processKind: 'both',
      total: 512 * MiB,
      bytes: { 'cuda:0': 512 * MiB }
    });
    const shell = join.rows.find(r => r.pid === 78)!;
    expect(shell).toMatchObject({ total: 0, unknown: ['cuda:0'] });
    expect(join.totals['cuda:0']).toMatchObject({
      otherBytes: 512 * MiB,
      otherCount: 2
    });
  });

  it('a process on two devices is one row with bytes per device; totals per device', () => {
    const processes = gpuProcessesMessage([], {
      devices: [
        {
          index: 0,
          processes: [
            gpuProcess({ pid: 1000, used: GiB, self: true }),
            gpuProcess({ pid: 5, used: 2 * GiB })
          ]
        },
        {
          index: 1,
          processes: [gpuProcess({ pid: 5, kind: 'graphics', used: GiB })]
        }
      ]
    });
    const join = joinGpuProcesses({
      processes,
      kernelId: 'k1',
      server: null,
      known: [],
      now: NOW
    });
    const row = join.rows.find(r => r.pid === 5)!;
    expect(row).toMatchObject({
      bytes: { 'cuda:0': 2 * GiB, 'cuda:1': GiB },
      total: 3 * GiB,
      processKind: 'both'
    });
    expect(join.totals['cuda:1']).toMatchObject({
      otherBytes: GiB,
      otherCount: 1
    });
    expect(
      processesOnDevice(join, 'cuda:1').map(p => [p.row.pid, p.bytes])
    ).toEqual([[5, GiB]]);
  });

  it('this kernel is its pid even without self; a busy kernel has no idle time', () => {
    const processes = message();
    processes.devices[0].processes[0].self = false;
    const join = joinGpuProcesses({
      processes,
      kernelId: 'k1',
      server: serverAnswer([
        serverKernel({ id: 'k2', pid: 2000, executionState: 'busy' })
      ]),
      known: [],
      now: NOW
    });
    expect(join.rows.find(r => r.pid === 1000)!.kind).toBe('this-kernel');
    expect(join.rows.find(r => r.pid === 2000)!.kernel).toMatchObject({
      state: 'busy',
      idleSeconds: null
    });
  });
});

describe('processesOnDevice', () => {
  const join = joinGpuProcesses({
    processes: message(),
    kernelId: 'k1',
    server: serverAnswer([serverKernel({ id: 'k2', pid: 2000 })]),
    known: [],
    now: NOW
  });
  const pids = (key: any, direction: 'asc' | 'desc') =>
    processesOnDevice(join, 'cuda:0', { key, direction }).map(p => p.row.pid);

  it('sorts by bytes (default: largest first), pid, process and state', () => {
    expect(processesOnDevice(join, 'cuda:0').map(p => p.row.pid)).toEqual([
      2000, 4242, 1000
    ]);
    expect(pids('bytes', 'asc')).toEqual([1000, 4242, 2000]);
    expect(pids('pid', 'asc')).toEqual([1000, 2000, 4242]);
    // python (this kernel), k2.ipynb, python3
    expect(pids('process', 'asc')).toEqual([2000, 1000, 4242]);
    // this kernel, idle kernels, other processes
    expect(pids('state', 'asc')).toEqual([1000, 2000, 4242]);
  });

  it('lists nothing for a device the message does not have', () => {
    expect(processesOnDevice(join, 'cuda:3')).toEqual([]);
  });
});

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

describe('formatIdle', () => {
  it('is coarse', () => {
    expect(formatIdle(40.7)).toBe('40 s');
    expect(formatIdle(25 * 60 + 3)).toBe('25 min');
    expect(formatIdle(2 * 3600 + 5 * 60)).toBe('2 h 05 min');
    expect(formatIdle(3 * 86400 + 4 * 3600)).toBe('3 d 4 h');
    expect(formatIdle(null)).toBe('—');
    expect(formatIdle(-1)).toBe('—');
  });
});
