/**
 * Issue 12: the agent's `gpuProcesses` message (protocol 2) and the server
 * extension's answer (`GET gpu-hygiene/kernels`), validated before use.
 */
import { ServerConnection } from '@jupyterlab/services';
import {
  GPU_PROCESSES_MAX_DEVICES,
  GPU_PROCESSES_MAX_PER_DEVICE,
  parseKernelMessage
} from '../../src/protocol';
import { GpuKernelModel } from '../../src/model';
import { parseServerKernels } from '../../src/server-kernels-schema';
import { ServerKernelsState } from '../../src/server-kernel-types';
import {
  fetchServerKernels,
  ServerKernels,
  serverKernelsUrl
} from '../../src/server-kernels';
import {
  gpuProcess,
  gpuProcessesMessage,
  serverAnswer,
  serverKernel
} from './fixtures';

const reason = (data: unknown) => {
  const parsed = parseKernelMessage(data);
  return parsed.ok ? 'ok' : parsed.reason;
};

describe('gpuProcesses message', () => {
  it('accepts the contract: host, container and unknown namespaces, null fields, several devices', () => {
    const full = gpuProcessesMessage([
      gpuProcess({ pid: 7, kind: 'graphics', used: null, name: null }),
      gpuProcess({ pid: 8, kind: 'both', cmdline: null, user: '1001' })
    ]);
    expect(parseKernelMessage(full)).toEqual({ ok: true, message: full });
    for (const namespace of ['container', 'unknown'] as const) {
      expect(reason(gpuProcessesMessage([], { namespace }))).toBe('ok');
    }
    expect(
      reason(
        gpuProcessesMessage([], {
          devices: [
            { index: 0, processes: [] },
            { index: 1, processes: [gpuProcess()] }
          ]
        })
      )
    ).toBe('ok');
    // A cmdline of 200 astral characters (400 UTF-16 units) still fits.
    expect(
      reason(gpuProcessesMessage([gpuProcess({ cmdline: '😀'.repeat(200) })]))
    ).toBe('ok');
  });

  it('rejects a wrong kind, namespace, negative bytes or missing self', () => {
    expect(
      reason(gpuProcessesMessage([gpuProcess({ kind: 'video' as any })]))
    ).toMatch(/^devices\.0\.processes\.1\.kind/);
    expect(
      reason(gpuProcessesMessage([], { namespace: 'pod' as any }))
    ).toMatch(/^namespace/);
    expect(reason(gpuProcessesMessage([gpuProcess({ used: -1 })]))).toMatch(
      /used/
    );
    const noSelf: Partial<ReturnType<typeof gpuProcess>> = gpuProcess();
    delete noSelf.self;
    expect(reason(gpuProcessesMessage([noSelf as any]))).toMatch(/self/);
    expect(reason({ ...gpuProcessesMessage(), pid: 'me' })).toMatch(/^pid/);
  });

  it('is bounded: 64 processes per device, 16 devices, short strings', () => {
    const many = (n: number) =>
      Array.from({ length: n }, (_, i) => gpuProcess({ pid: 10 + i }));
    const fits = gpuProcessesMessage([], {
      devices: [{ index: 0, processes: many(GPU_PROCESSES_MAX_PER_DEVICE) }]
    });
    expect(reason(fits)).toBe('ok');
    expect(
      reason(
        gpuProcessesMessage([], {
          devices: [
            { index: 0, processes: many(GPU_PROCESSES_MAX_PER_DEVICE + 1) }
          ]
        })
      )
    ).toMatch(/^devices\.0\.processes/);
    expect(
      reason(
        gpuProcessesMessage([], {
          devices: Array.from(
            { length: GPU_PROCESSES_MAX_DEVICES + 1 },
            (_, index) => ({ index, processes: [] })
          )
        })
      )
    ).toMatch(/^devices/);
    expect(
      reason(gpuProcessesMessage([gpuProcess({ cmdline: 'x'.repeat(513) })]))
    ).toMatch(/cmdline/);
    expect(
      reason(gpuProcessesMessage([gpuProcess({ name: 'x'.repeat(257) })]))
    ).toMatch(/name/);
    expect(
      reason(gpuProcessesMessage([gpuProcess({ user: 'x'.repeat(257) })]))
    ).toMatch(/user/);
  });

  it('is kept in the kernel model, signalled, and forgotten on restart', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const seen: number[] = [];
    model.gpuProcessesChanged.connect((_, m) => seen.push(m.pid));
    const message = gpuProcessesMessage([gpuProcess()]);
    model.apply(message);
    expect(model.gpuProcesses).toBe(message);
    expect(seen).toEqual([1000]);
    model.resetKernelState();
    expect(model.gpuProcesses).toBeNull();
  });
});

describe('parseServerKernels', () => {
  it('accepts the contract, drops unknown fields', () => {
    const answer = serverAnswer([
      serverKernel(),
      serverKernel({
        id: 'k3',
        pid: null,
        lastActivity: null,
        executionState: 'busy',
        sessions: []
      })
    ]);
    expect(parseServerKernels(answer)).toEqual({ ok: true, answer });
    const extra = parseServerKernels({
      ...answer,
      version: 2,
      kernels: [{ ...serverKernel(), env: { SECRET: 'x' } }]
    });
    expect(extra.ok && extra.answer.kernels[0]).toEqual(serverKernel());
    expect(parseServerKernels(serverAnswer([], true)).ok).toBe(true);
    // the idle-holding threshold (issue 25): optional, non-negative
    const withThreshold = { ...answer, idleHolding: { minutes: 30, mib: 256 } };
    expect(parseServerKernels(withThreshold)).toEqual({
      ok: true,
      answer: withThreshold
    });
    expect(
      parseServerKernels({ ...answer, idleHolding: { minutes: -1, mib: 256 } })
    ).toEqual({ ok: false, reason: expect.stringMatching(/^idleHolding/) });
  });

  it('rejects a malformed answer with the field it failed on', () => {
    expect(parseServerKernels({ kernels: [] })).toEqual({
      ok: false,
      reason: expect.stringMatching(/^gateway/)
    });
    expect(
      parseServerKernels(serverAnswer([serverKernel({ pid: -3 })]))
    ).toEqual({ ok: false, reason: expect.stringMatching(/^kernels\.0\.pid/) });
    expect(
      parseServerKernels(
        serverAnswer([serverKernel({ sessions: [{ path: 'a' } as any] })])
      )
    ).toEqual({
      ok: false,
      reason: expect.stringMatching(/^kernels\.0\.sessions\.0/)
    });
    expect(parseServerKernels('<html>').ok).toBe(false);
    expect(parseServerKernels(null).ok).toBe(false);
  });

  it('is bounded: string lengths and list sizes', () => {
    expect(
      parseServerKernels(serverAnswer([serverKernel({ id: 'x'.repeat(257) })]))
        .ok
    ).toBe(false);
    const session = serverKernel().sessions[0];
    expect(
      parseServerKernels(
        serverAnswer([
          serverKernel({
            sessions: Array.from({ length: 1001 }, () => session)
          })
        ])
      ).ok
    ).toBe(false);
    expect(
      parseServerKernels(
        serverAnswer([
          serverKernel({ sessions: [{ ...session, path: 'p'.repeat(4097) }] })
        ])
      ).ok
    ).toBe(false);
  });
});

/** Server settings whose fetch answers with `respond`; the URLs asked are kept. */
function settingsAnswering(
  respond: (url: string) => Promise<Partial<Response>>
): { settings: ServerConnection.ISettings; urls: string[] } {
  const urls: string[] = [];
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/user/alice/',
    Request: class {
      headers = {
        append: () => undefined,
        has: () => true,
        set: () => undefined
      };
      constructor(readonly url: string) {}
    } as any,
    fetch: ((request: { url: string }) => {
      urls.push(request.url);
      return respond(request.url);
    }) as any
  });
  return { settings, urls };
}

const json = (status: number, body: unknown): Partial<Response> => ({
  status,
  ok: status >= 200 && status < 300,
  statusText: status === 403 ? 'Forbidden' : 'OK',
  json: async () => body
});

describe('fetchServerKernels', () => {
  const now = () => 42;

  it('asks {baseUrl}gpu-hygiene/kernels and validates the answer', async () => {
    const answer = serverAnswer([serverKernel()]);
    const { settings, urls } = settingsAnswering(async () => json(200, answer));
    expect(await fetchServerKernels(settings, now)).toEqual({
      status: 'ok',
      answer,
      at: 42
    });
    // JupyterLab's default `cache: 'no-store'` adds a cache buster (the server reads no query).
    expect(urls).toEqual([
      expect.stringMatching(
        /^http:\/\/localhost:8888\/user\/alice\/gpu-hygiene\/kernels(\?\d+)?$/
      )
    ]);
    expect(serverKernelsUrl('http://h/base')).toBe(
      'http://h/base/gpu-hygiene/kernels'
    );
  });

  it('404 is a server without the extension; other failures say what happened', async () => {
    const cases: Array<[() => Promise<Partial<Response>>, ServerKernelsState]> =
      [
        [async () => json(404, null), { status: 'missing', at: 42 }],
        [
          async () => json(403, null),
          { status: 'error', reason: 'http', detail: '403 Forbidden', at: 42 }
        ],
        [
          async () => {
            throw new TypeError('Failed to fetch');
          },
          {
            status: 'error',
            reason: 'network',
            detail: 'Failed to fetch',
            at: 42
          }
        ],
        [
          async () => ({
            ...json(200, null),
            json: async () => {
              throw new SyntaxError('Unexpected token <');
            }
          }),
          {
            status: 'error',
            reason: 'invalid',
            detail: 'Unexpected token <',
            at: 42
          }
        ],
        [
          async () => json(200, { kernels: 'none' }),
          {
            status: 'error',
            reason: 'invalid',
            detail: expect.stringMatching(/^kernels/),
            at: 42
          }
        ]
      ];
    const warn = jest.spyOn(console, 'warn');
    const error = jest.spyOn(console, 'error');
    for (const [respond, expected] of cases) {
      const { settings } = settingsAnswering(respond);
      expect(await fetchServerKernels(settings, now)).toEqual(expected);
    }
    // No console noise.
    expect(warn).not.toHaveBeenCalled();
    expect(error).not.toHaveBeenCalled();
    warn.mockRestore();
    error.mockRestore();
  });
});

describe('ServerKernels', () => {
  function setup(states: ServerKernelsState[]) {
    let clock = 1_000_000;
    const calls: number[] = [];
    const kernels = new ServerKernels({
      serverSettings: ServerConnection.makeSettings({
        baseUrl: 'http://localhost/'
      }),
      now: () => clock,
      fetch: async () => {
        calls.push(clock);
        const next = states[Math.min(calls.length - 1, states.length - 1)];
        return 'at' in next ? { ...next, at: clock } : next;
      }
    });
    const emitted: string[] = [];
    kernels.changed.connect((_, s) => emitted.push(s.status));
    return {
      kernels,
      calls,
      emitted,
      tick: (ms: number) => {
        clock += ms;
      }
    };
  }
  const ok: ServerKernelsState = {
    status: 'ok',
    answer: serverAnswer([serverKernel()]),
    at: 0
  };

  it('fetches when the answer is older than 5 s, once at a time; equal answers emit nothing', async () => {
    const { kernels, calls, emitted, tick } = setup([ok]);
    expect(kernels.state).toEqual({ status: 'none' });
    const [a, b] = [kernels.refresh(), kernels.refresh()];
    expect(a).toBe(b); // one request in flight
    await a;
    expect(kernels.answer).toEqual(ok.status === 'ok' && ok.answer);
    tick(4000);
    await kernels.refresh();
    expect(calls).toHaveLength(1); // 4 s old: kept
    tick(1500);
    await kernels.refresh();
    expect(calls).toHaveLength(2);
    await kernels.refresh(0); // the panel opened: always
    expect(calls).toHaveLength(3);
    expect(emitted).toEqual(['ok']);
  });

  it('a 404 is asked again after a minute, or when the panel opens', async () => {
    const { kernels, calls, emitted, tick } = setup([
      { status: 'missing', at: 0 },
      { status: 'missing', at: 0 },
      ok
    ]);
    await kernels.refresh();
    expect(kernels.state.status).toBe('missing');
    tick(30_000);
    await kernels.refresh();
    expect(calls).toHaveLength(1);
    await kernels.refresh(0);
    expect(calls).toHaveLength(2);
    tick(61_000);
    await kernels.refresh();
    expect(kernels.state.status).toBe('ok');
    expect(emitted).toEqual(['missing', 'ok']);
  });

  it('fetches nothing without server settings or once disposed', async () => {
    const none = new ServerKernels();
    expect(await none.refresh(0)).toEqual({ status: 'none' });
    const { kernels, calls } = setup([ok]);
    kernels.dispose();
    await kernels.refresh(0);
    expect(calls).toEqual([]);
  });
});
