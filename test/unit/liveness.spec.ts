/**
 * The liveness watch on its own (LivenessWatch, driven through its
 * callbacks), then AgentConnection under hostile kernel life cycles: the
 * liveness watch end to end (a killed idle kernel is reported dead within the
 * sampler period plus a probe), automatic restarts, the comm it opens and the
 * counts it keeps of what it holds.
 */
import { Signal } from '@lumino/signaling';
import { AgentConnection } from '../../src/connection';
import { LivenessWatch } from '../../src/liveness';
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

/**
 * A LivenessWatch over a fake kernel: `probe()` waits until the test answers
 * (`answer(true)`), unless `state.autoAnswer` is set.
 */
function fakeWatch(interval = 1000, now?: () => number) {
  const state = {
    active: true,
    idle: true,
    autoAnswer: false,
    reject: false,
    probes: [] as number[],
    dead: [] as string[],
    alive: 0
  };
  const pending: Array<(answered: boolean) => void> = [];
  const watch = new LivenessWatch({
    sampleIntervalMs: interval,
    isActive: () => state.active,
    canProbe: () => state.idle,
    probe: () => {
      state.probes.push(Date.now());
      if (state.reject) {
        return Promise.reject(new Error('Canceled future'));
      }
      return state.autoAnswer
        ? Promise.resolve(true)
        : new Promise<boolean>(resolve => pending.push(resolve));
    },
    dead: reason => state.dead.push(reason),
    alive: () => state.alive++,
    now
  });
  /** Answer the oldest probe not answered yet. */
  const answer = async (answered: boolean) => {
    pending.shift()?.(answered);
    await settle();
  };
  return { watch, state, answer };
}

describe('LivenessWatch', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('probes after the sampler period plus 250 ms of silence; no answer in 700 ms is death', async () => {
    const { watch, state } = fakeWatch();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1249);
    expect(state.probes).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(state.probes).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(699);
    expect(state.dead).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(state.dead).toEqual(['unresponsive']);
    // Reported once; the watch is not armed again by itself.
    await jest.advanceTimersByTimeAsync(600_000);
    expect(state.probes).toHaveLength(1);
    expect(state.dead).toEqual(['unresponsive']);
    expect(state.alive).toBe(0);
    watch.dispose();
  });

  it('takes a late answer as a sign of life and probes again a sampler period later', async () => {
    const { watch, state, answer } = fakeWatch();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1250 + 700);
    expect(state.dead).toEqual(['unresponsive']);
    await answer(true);
    expect(state.alive).toBe(1);
    await jest.advanceTimersByTimeAsync(999);
    expect(state.probes).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(state.probes).toHaveLength(2);
    watch.dispose();
  });

  it('ignores a late "not answered" and an answer to a probe it did not report', async () => {
    const { watch, state, answer } = fakeWatch();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1250 + 700);
    await answer(false);
    expect(state.alive).toBe(0);
    expect(state.dead).toEqual(['unresponsive']);
    // Inactive when the time was up: nothing reported, so a late answer is
    // nothing to take back either.
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1250);
    expect(state.probes).toHaveLength(2);
    state.active = false;
    await jest.advanceTimersByTimeAsync(700);
    await answer(true);
    expect(state.dead).toEqual(['unresponsive']);
    expect(state.alive).toBe(0);
    watch.dispose();
  });

  it('counts a rejected probe as no answer', async () => {
    const { watch, state } = fakeWatch();
    state.reject = true;
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1250 + 700);
    expect(state.probes).toHaveLength(1);
    expect(state.dead).toEqual(['unresponsive']);
    watch.dispose();
  });

  it('backs off from a kernel that answers: 1 s, 2 s, 4 s … after each answer, at most 60 s', async () => {
    const { watch, state } = fakeWatch();
    state.autoAnswer = true;
    const start = Date.now();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(320_000);
    const times = state.probes.map(t => t - start);
    expect(times[0]).toBe(1250);
    // Each gap: the 700 ms wait for the answer, then the back-off.
    expect(times.slice(1).map((t, i) => t - times[i])).toEqual([
      1700, 2700, 4700, 8700, 16_700, 32_700, 60_700, 60_700, 60_700, 60_700
    ]);
    expect(state.alive).toBe(11);
    expect(state.dead).toEqual([]);
    // Hearing the agent starts the back-off again from zero (the timer
    // already armed keeps its time: the next probe, at 371.95 s, is then
    // followed 1.7 s later, not 60.7 s).
    state.probes.length = 0;
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(55_000);
    expect(state.probes.map(t => t - start)).toEqual([371_950, 373_650]);
    watch.dispose();
  });

  it('never probes a kernel that cannot be probed, and looks again each sampler period', async () => {
    const { watch, state } = fakeWatch();
    state.idle = false;
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(state.probes).toHaveLength(0);
    // Looked at 1.25 s, then every second: 10.25 s is the next look.
    state.idle = true;
    await jest.advanceTimersByTimeAsync(249);
    expect(state.probes).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(state.probes).toHaveLength(1);
    watch.dispose();
  });

  it('heard() cancels the probe in flight; start() arms again from the last word', async () => {
    const { watch, state, answer } = fakeWatch();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1250);
    expect(state.probes).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(300);
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(400);
    expect(state.dead).toEqual([]);
    await answer(true);
    expect(state.alive).toBe(0);
    // The next probe: 1250 ms after heard().
    await jest.advanceTimersByTimeAsync(849);
    expect(state.probes).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(state.probes).toHaveLength(2);
    watch.dispose();
  });

  it('start() is a no-op while armed', async () => {
    const { watch, state } = fakeWatch();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1000);
    watch.start();
    watch.start();
    await jest.advanceTimersByTimeAsync(250);
    expect(state.probes).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(700);
    expect(state.dead).toEqual(['unresponsive']);
    watch.dispose();
  });

  it('does nothing while inactive and stays disarmed until start()', async () => {
    const { watch, state } = fakeWatch();
    state.active = false;
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.probes).toHaveLength(0);
    state.active = true;
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.probes).toHaveLength(0);
    // Silent for long already: probed at once.
    watch.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(state.probes).toHaveLength(1);
    watch.dispose();
  });

  it('stop() disarms and cancels the probe in flight; dispose() is for good', async () => {
    const { watch, state, answer } = fakeWatch();
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(1000);
    watch.stop();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.probes).toHaveLength(0);
    watch.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(state.probes).toHaveLength(1);
    watch.stop();
    await jest.advanceTimersByTimeAsync(700);
    await answer(true);
    expect(state.dead).toEqual([]);
    expect(state.alive).toBe(0);
    watch.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(state.probes).toHaveLength(2);
    watch.dispose();
    expect(watch.isDisposed).toBe(true);
    await jest.advanceTimersByTimeAsync(700);
    expect(state.dead).toEqual([]);
    watch.start();
    watch.dispose();
    await jest.advanceTimersByTimeAsync(600_000);
    expect(state.probes).toHaveLength(2);
  });

  it('follows a new sampler period from the next time it is armed', async () => {
    const { watch, state } = fakeWatch();
    expect(watch.sampleIntervalMs).toBe(1000);
    watch.sampleIntervalMs = 5000;
    watch.heard();
    watch.start();
    await jest.advanceTimersByTimeAsync(5249);
    expect(state.probes).toHaveLength(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(state.probes).toHaveLength(1);
    watch.dispose();
  });

  it('reads silence off the clock it is given', async () => {
    let t = 0;
    const { watch, state } = fakeWatch(1000, () => t);
    watch.heard();
    watch.start();
    // The timers run, but the given clock stands still: never silent long enough.
    await jest.advanceTimersByTimeAsync(10_000);
    expect(state.probes).toHaveLength(0);
    t = 1250;
    await jest.advanceTimersByTimeAsync(1250);
    expect(state.probes).toHaveLength(1);
    watch.dispose();
  });
});

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
    // JupyterLab >= 4.4's comms have `commsOverSubshells` (default
    // 'perComm'); older ones have no such property.
    subshells: true,
    createComm: () => {
      const comm: any = {
        ...(kernel.subshells ? { commsOverSubshells: 'perComm' } : {}),
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

  it('leaves a comm without subshells (JupyterLab < 4.4) as it is', async () => {
    const { kernel, comms } = fakeKernel();
    kernel.subshells = false;
    const model = new GpuKernelModel({ kernelId: 'k' });
    const connection = new AgentConnection({
      kernel,
      model,
      sampleIntervalMs: 1000
    });
    await settle();
    const comm = comms[comms.length - 1];
    expect(comm).toBeDefined();
    expect('commsOverSubshells' in comm).toBe(false);
    comm.onMsg({ content: { data: hello } });
    expect(model.status).toBe('ready');
    connection.dispose();
  });
});
