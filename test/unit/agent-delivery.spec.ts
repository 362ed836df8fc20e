/**
 * How the agent reaches a kernel now that its text is in a chunk of its own
 * (src/agent-chunk.ts, loaded by src/agent-loader.ts when the first Python
 * kernel connects): sent once the chunk is there, to every kernel waiting
 * for it, to the new process after a restart during the load, never to a
 * disposed connection; a chunk that cannot be loaded fails visibly and is
 * tried again.
 */
import { Signal } from '@lumino/signaling';
import * as chunk from '../../src/agent-chunk';
import { loadAgent } from '../../src/agent-loader';
import { AgentConnection } from '../../src/connection';
import { GpuKernelModel } from '../../src/model';
import { h200Hello } from './fixtures';

jest.mock('../../src/agent-loader', () => ({ loadAgent: jest.fn() }));

const load = loadAgent as jest.MockedFunction<typeof loadAgent>;

/** A promise resolved or rejected from outside. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

/** Just enough of a Python kernel connection: it records executes and comms. */
function fakeKernel(id: string, reply: Record<string, unknown> = {}) {
  const executes: string[] = [];
  const requests: Array<Record<string, unknown>> = [];
  const comms: Array<{ opened: unknown[]; afterExecutes: number }> = [];
  const kernel = {
    id,
    status: 'idle',
    connectionStatus: 'connected',
    isDisposed: false,
    handleComms: true,
    info: Promise.resolve({ language_info: { name: 'python' } }),
    statusChanged: new Signal<any, any>({}),
    connectionStatusChanged: new Signal<any, any>({}),
    requestExecute: (content: { code: string }) => {
      executes.push(content.code);
      requests.push(content);
      const future: any = {};
      future.done = Promise.resolve({ content: { status: 'ok', ...reply } });
      return future;
    },
    createComm: () => {
      const comm: any = {
        opened: [],
        afterExecutes: executes.length,
        isDisposed: false,
        open: (data: unknown) => comm.opened.push(data),
        send: () => undefined,
        close: () => {
          comm.isDisposed = true;
        }
      };
      comms.push(comm);
      return comm;
    },
    requestKernelInfo: () => Promise.resolve({})
  };
  const setStatus = (status: string) => {
    kernel.status = status;
    kernel.statusChanged.emit(status);
  };
  return { kernel, executes, requests, comms, setStatus };
}

/** Let promises and zero timeouts run. */
async function settle(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await new Promise(resolve => setTimeout(resolve, 0));
  }
}

function connect(kernel: ReturnType<typeof fakeKernel>['kernel']) {
  const model = new GpuKernelModel({ kernelId: kernel.id });
  const connection = new AgentConnection({
    kernel: kernel as any,
    model,
    sampleIntervalMs: 1000
  });
  return { model, connection };
}

const installCode = chunk.agentInstallCode(1000);

afterEach(() => {
  load.mockReset();
});

describe('agent delivery from its lazily loaded chunk', () => {
  it('sends the agent once, after the chunk arrived, then opens the comm', async () => {
    const arrival = deferred<typeof chunk>();
    load.mockImplementation(() => arrival.promise);
    const { kernel, executes, comms } = fakeKernel('k1');
    const { model, connection } = connect(kernel);
    await settle();
    // The gauge says "starting" at once; nothing is sent before the chunk.
    expect(model.status).toBe('starting');
    expect(load).toHaveBeenCalledTimes(1);
    expect(executes).toEqual([]);
    expect(comms).toEqual([]);

    arrival.resolve(chunk);
    await settle();
    expect(executes).toEqual([installCode]);
    expect(
      executes[0].startsWith('exec("# jupyterlab-gpu-hygiene loader')
    ).toBe(true);
    expect(comms).toHaveLength(1);
    expect(comms[0].afterExecutes).toBe(1);
    expect(comms[0].opened).toEqual([
      {
        protocol: 2,
        type: 'configure',
        sampleIntervalMs: 1000,
        provenance: false
      }
    ]);
    connection.dispose();
  });

  it('a kernel that connects while the chunk loads gets the agent too, once', async () => {
    const arrival = deferred<typeof chunk>();
    load.mockImplementation(() => arrival.promise);
    const first = fakeKernel('k1');
    const a = connect(first.kernel);
    await settle(2);
    const second = fakeKernel('k2');
    const b = connect(second.kernel);
    await settle();
    expect(first.executes.length + second.executes.length).toBe(0);
    expect([a.model.status, b.model.status]).toEqual(['starting', 'starting']);

    arrival.resolve(chunk);
    await settle();
    expect(first.executes).toEqual([installCode]);
    expect(second.executes).toEqual([installCode]);
    expect(first.comms).toHaveLength(1);
    expect(second.comms).toHaveLength(1);
    a.connection.dispose();
    b.connection.dispose();
  });

  it('a restart while the chunk loads: the agent goes to the new process, once', async () => {
    const arrival = deferred<typeof chunk>();
    load.mockImplementation(() => arrival.promise);
    const { kernel, executes, comms, setStatus } = fakeKernel('k1');
    const { model, connection } = connect(kernel);
    await settle();
    setStatus('restarting');
    expect(model.status).toBe('restarting');
    await settle();
    // The new process's attempt waits for the chunk too.
    expect(model.status).toBe('starting');
    setStatus('idle');
    await settle();
    expect(model.status).toBe('starting');
    expect(executes).toEqual([]);

    arrival.resolve(chunk);
    await settle();
    // The attempt of the first process was abandoned: one install, one comm.
    expect(executes).toEqual([installCode]);
    expect(comms).toHaveLength(1);
    connection.dispose();
  });

  it('a connection disposed while the chunk loads sends nothing', async () => {
    const arrival = deferred<typeof chunk>();
    load.mockImplementation(() => arrival.promise);
    const { kernel, executes, comms } = fakeKernel('k1');
    const before = AgentConnection.liveCounts().connections;
    const { connection } = connect(kernel);
    await settle();
    connection.dispose();
    arrival.resolve(chunk);
    await settle();
    expect(executes).toEqual([]);
    expect(comms).toEqual([]);
    expect(AgentConnection.liveCounts().connections).toBe(before);
  });

  it('a chunk that cannot be loaded fails visibly; a restart tries again', async () => {
    load.mockImplementationOnce(() =>
      Promise.reject(new Error('Loading chunk 224 failed.'))
    );
    const { kernel, executes, comms, setStatus } = fakeKernel('k1');
    const { model, connection } = connect(kernel);
    await settle();
    expect(model.status).toBe('failed');
    expect(model.failure).toBe(
      'the kernel agent could not be loaded: Loading chunk 224 failed.'
    );
    expect(executes).toEqual([]);

    load.mockImplementation(() => Promise.resolve(chunk));
    setStatus('restarting');
    await settle();
    setStatus('idle');
    await settle();
    expect(load).toHaveBeenCalledTimes(2);
    expect(executes).toEqual([installCode]);
    expect(comms).toHaveLength(1);
    connection.dispose();
  });
});

describe('the agent chunk', () => {
  it('ships the agent modules verbatim, zlib-compressed and base64-encoded', () => {
    const fs = require('fs') as typeof import('fs');
    const path = require('path') as typeof import('path');
    const zlib = require('zlib') as typeof import('zlib');
    const { AGENT_SOURCE } = require('../../src/_generated/agent');
    const dir = path.join(__dirname, '../../src/agent/gpu_hygiene_agent');
    const read = (name: string) =>
      fs.readFileSync(path.join(dir, `${name}.py`), 'utf8');
    const pairs: Array<[string, string]> = JSON.parse(
      zlib.inflateSync(Buffer.from(AGENT_SOURCE, 'base64')).toString('utf8')
    );
    expect(pairs[pairs.length - 1][0]).toBe('__init__');
    expect(pairs.length).toBeGreaterThan(10);
    for (const [name, text] of pairs) {
      expect(text).toBe(read(name));
    }
    // The install code holds the payload as it is, a third of the text.
    expect(installCode).toContain(AGENT_SOURCE);
    const plain = pairs.reduce((sum, [, text]) => sum + text.length, 0);
    expect(installCode.length).toBeLessThan(plain / 2);
  });
});

describe('loadAgent', () => {
  it('loads the chunk once for every caller, and again after a failure', async () => {
    const actual = jest.requireActual<typeof import('../../src/agent-loader')>(
      '../../src/agent-loader'
    );
    const [one, two] = await Promise.all([
      actual.loadAgent(),
      actual.loadAgent()
    ]);
    expect(one).toBe(two);
    expect(one.agentInstallCode(1000)).toBe(installCode);
    expect(typeof one.parseKernelMessage).toBe('function');

    await jest.isolateModulesAsync(async () => {
      jest.doMock('../../src/agent-chunk', () => {
        throw new Error('offline');
      });
      const isolated = jest.requireActual<
        typeof import('../../src/agent-loader')
      >('../../src/agent-loader');
      await expect(isolated.loadAgent()).rejects.toThrow('offline');
      jest.dontMock('../../src/agent-chunk');
      // Forgotten: the next call loads it.
      const again = await isolated.loadAgent();
      expect(again.agentInstallCode(1000)).toBe(installCode);
    });
  });
});

// the early hello as an agent sends it (pid of its own, total in bytes as NVML says)
const HELLO = h200Hello({ pid: 4242 });
const KEY = Object.keys(chunk.HELLO_EXPRESSION)[0];

describe('the hello in the install reply (user expression)', () => {
  it('is asked for by the install request and applied before the comm opens', async () => {
    load.mockImplementation(() => Promise.resolve(chunk));
    const { kernel, requests, comms } = fakeKernel('k1', {
      user_expressions: {
        [KEY]: {
          status: 'ok',
          data: { 'application/json': HELLO, 'text/plain': '{}' },
          metadata: {}
        }
      }
    });
    const { model, connection } = connect(kernel);
    // the model's state at the moment the comm is created
    const create = kernel.createComm;
    const atOpen: Array<string> = [];
    kernel.createComm = () => {
      atOpen.push(model.status);
      return create();
    };
    await settle();
    expect(atOpen).toEqual(['ready']);
    expect(requests[0]).toMatchObject({
      silent: true,
      store_history: false,
      user_expressions: chunk.HELLO_EXPRESSION
    });
    // ready with the devices, and the comm opened after, for the samples
    expect(model.status).toBe('ready');
    expect(model.hello).toEqual(HELLO);
    expect(comms).toHaveLength(1);
    connection.dispose();
  });

  it('without one (an older kernel, a failed expression) the comm’s hello is awaited as before', async () => {
    load.mockImplementation(() => Promise.resolve(chunk));
    const { kernel, comms } = fakeKernel('k1', {
      user_expressions: {
        [KEY]: { status: 'error', ename: 'AttributeError', evalue: 'hello_now' }
      }
    });
    const { model, connection } = connect(kernel);
    await settle();
    expect(model.status).toBe('starting');
    expect(model.hello).toBeNull();
    expect(comms).toHaveLength(1);
    connection.dispose();
  });
});

describe('helloFromReply', () => {
  const reply = (data: Record<string, unknown>, status = 'ok') => ({
    status: 'ok',
    user_expressions: { [KEY]: { status, data, metadata: {} } }
  });

  it('reads application/json, else the JSON in text/plain', () => {
    expect(chunk.helloFromReply(reply({ 'application/json': HELLO }))).toEqual(
      HELLO
    );
    expect(
      chunk.helloFromReply(reply({ 'text/plain': JSON.stringify(HELLO) }))
    ).toEqual(HELLO);
  });

  it('is null for anything else, and validates like a comm message', () => {
    expect(chunk.helloFromReply({ status: 'ok' })).toBeNull();
    expect(chunk.helloFromReply(null)).toBeNull();
    expect(chunk.helloFromReply(reply({}, 'error'))).toBeNull();
    // no agent ran: hello_now() gave {}
    expect(chunk.helloFromReply(reply({ 'application/json': {} }))).toBeNull();
    expect(
      chunk.helloFromReply(reply({ 'text/plain': "{'a': 1}" }))
    ).toBeNull();
    expect(
      chunk.helloFromReply(
        reply({ 'application/json': { ...HELLO, pid: 'x' } })
      )
    ).toBeNull();
    // another message type is not a hello
    expect(
      chunk.helloFromReply(
        reply({ 'application/json': { protocol: 2, type: 'error' } })
      )
    ).toBeNull();
  });
});
