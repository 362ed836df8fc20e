/**
 * AgentConnection under hostile kernel life cycles: the liveness watch (a
 * killed idle kernel is reported dead within the sampler period plus a
 * probe), automatic restarts, the comm it opens and the counts it keeps of
 * what it holds.
 */
import { Signal } from '@lumino/signaling';
import { AgentConnection } from '../../src/connection';
import { GpuKernelModel } from '../../src/model';
import { gpuSample } from './fixtures';

const hello = {
  protocol: 2,
  type: 'hello',
  agentVersion: '0.2.0',
  python: '3.11.7',
  pid: 42,
  torch: null,
  nvml: false,
  nvmlError: 'NVML Shared Library Not Found',
  devices: []
};

/** A Python kernel connection, idle, whose kernel_info answers are up to the test. */
function fakeKernel() {
  const comms: any[] = [];
  const statusChanged = new Signal<any, string>({});
  const kernel: any = {
    id: 'k',
    status: 'idle',
    connectionStatus: 'connected',
    isDisposed: false,
    handleComms: true,
    info: Promise.resolve({ language_info: { name: 'python' } }),
    statusChanged,
    connectionStatusChanged: new Signal<any, any>({}),
    kernelInfoRequests: 0,
    answerKernelInfo: true,
    requestKernelInfo: () => {
      kernel.kernelInfoRequests++;
      return kernel.answerKernelInfo
        ? Promise.resolve({ content: { status: 'ok' } })
        : new Promise(() => undefined);
    },
    requestExecute: () => {
      const future: any = {};
      future.done = Promise.resolve({ content: { status: 'ok' } });
      return future;
    },
    createComm: () => {
      const comm: any = {
        isDisposed: false,
        open: () => undefined,
        send: () => undefined,
        close: () => {
          comm.isDisposed = true;
        },
        dispose: () => {
          comm.isDisposed = true;
        }
      };
      comms.push(comm);
      return comm;
    },
    setStatus: (status: string) => {
      kernel.status = status;
      statusChanged.emit(status);
    }
  };
  return { kernel, comms };
}

/** Let the connection's promises settle. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
}

async function connected(interval = 1000) {
  const { kernel, comms } = fakeKernel();
  const model = new GpuKernelModel({ kernelId: 'k' });
  const connection = new AgentConnection({
    kernel,
    model,
    sampleIntervalMs: interval
  });
  await settle();
  const comm = comms[comms.length - 1];
  const send = (data: unknown) => comm.onMsg({ content: { data } });
  send(hello);
  expect(model.status).toBe('ready');
  return { kernel, comms, comm, model, connection, send };
}

describe('AgentConnection liveness', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('reports an idle kernel that stops sampling and does not answer as dead', async () => {
    const { kernel, model, connection, send } = await connected();
    kernel.answerKernelInfo = false;
    // samples every second: no probe
    for (let seq = 1; seq <= 5; seq++) {
      await jest.advanceTimersByTimeAsync(1000);
      send(gpuSample(0, 0, seq));
    }
    expect(kernel.kernelInfoRequests).toBe(0);
    // the process is killed right after a sample: probed after 1 s + 250 ms,
    // dead 700 ms later
    await jest.advanceTimersByTimeAsync(1249);
    expect(kernel.kernelInfoRequests).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(kernel.kernelInfoRequests).toBe(1);
    expect(model.status).toBe('ready');
    await jest.advanceTimersByTimeAsync(699);
    expect(model.status).toBe('ready');
    await jest.advanceTimersByTimeAsync(1);
    expect(model.status).toBe('dead');
    expect(model.deadReason).toBe('unresponsive');
    // a late sample: it was alive after all
    send(gpuSample(0, 0, 6));
    expect(model.status).toBe('ready');
    expect(model.deadReason).toBeNull();
    connection.dispose();
  });

  it('never probes a busy kernel, and backs off from one that answers', async () => {
    const { kernel, model, connection } = await connected();
    kernel.setStatus('busy');
    await jest.advanceTimersByTimeAsync(10_000);
    expect(kernel.kernelInfoRequests).toBe(0);
    expect(model.status).toBe('ready');
    kernel.setStatus('idle');
    // answers, though the agent stays silent: alive, probed less and less often
    await jest.advanceTimersByTimeAsync(60_000);
    expect(model.status).toBe('ready');
    const probes = kernel.kernelInfoRequests;
    expect(probes).toBeGreaterThan(0);
    expect(probes).toBeLessThan(8);
    connection.dispose();
    await jest.advanceTimersByTimeAsync(600_000);
    expect(kernel.kernelInfoRequests).toBe(probes);
  });

  it('keeps "kernel dead" through an automatic restart until the new agent answers', async () => {
    const { kernel, comms, model, connection } = await connected();
    model.apply({
      protocol: 2,
      type: 'error',
      where: 'inventory',
      message: 'ZeroDivisionError: division by zero'
    });
    // JupyterLab: "restarting" from the server's restarter, then "autorestarting"
    kernel.setStatus('restarting');
    kernel.setStatus('autorestarting');
    expect(model.status).toBe('dead');
    expect(model.deadReason).toBe('restarting');
    expect(model.agentErrors).toEqual([]);
    await jest.advanceTimersByTimeAsync(0);
    await settle();
    // the agent was sent and a new comm opened: still dead until hello
    expect(comms).toHaveLength(2);
    expect(model.status).toBe('dead');
    comms[1].onMsg({ content: { data: { ...hello, pid: 43 } } });
    expect(model.status).toBe('ready');
    expect(model.hello?.pid).toBe(43);
    connection.dispose();
  });

  it('opens its comm off subshells and counts what it holds', async () => {
    const before = AgentConnection.liveCounts();
    const { comm, connection } = await connected();
    expect(comm.commsOverSubshells).toBe('disabled');
    expect(AgentConnection.liveCounts()).toEqual({
      connections: before.connections + 1,
      comms: before.comms + 1,
      kernelSlots: before.kernelSlots + 2,
      ownKernels: before.ownKernels
    });
    connection.dispose();
    expect(AgentConnection.liveCounts()).toEqual(before);
  });
});
