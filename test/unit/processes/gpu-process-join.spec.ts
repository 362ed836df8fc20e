/**
 * Issue 12: who else is on the GPU. NVML's processes (the agent's
 * `gpuProcesses`) joined by pid with the server's kernels and with the
 * `hello.pid` of the kernels the browser knows.
 */
import { processesOnDevice } from '../../../src/analysis/processes/device-processes';
import { joinGpuProcesses } from '../../../src/analysis/processes/gpu-process-join';
import { IKnownKernel } from '../../../src/analysis/processes/gpu-process-types';
import { kernelLabel } from '../../../src/analysis/processes/kernel-labels';
import {
  gpuProcess,
  gpuProcessesMessage,
  serverAnswer,
  serverKernel
} from '../fixtures';
import { GiB, message, MiB, NOW } from './process-messages';

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
