/**
 * Issue 12: the "On this GPU" table's rows of one device, sorted.
 */
import { processesOnDevice } from '../../../src/analysis/processes/device-processes';
import { joinGpuProcesses } from '../../../src/analysis/processes/gpu-process-join';
import { serverAnswer, serverKernel } from '../fixtures';
import { message, NOW } from './process-messages';

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
