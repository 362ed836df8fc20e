import { parseKernelMessage } from '../../src/protocol';
import { c01Inventory, gpuSample } from './fixtures';

const hello = {
  protocol: 1,
  type: 'hello',
  agentVersion: '0.1.0',
  python: '3.11.7',
  pid: 4242,
  torch: null,
  nvml: false,
  nvmlError: 'NVML Shared Library Not Found',
  devices: []
};

describe('parseKernelMessage', () => {
  it('accepts every message kind of protocol 1', () => {
    const cleaned = {
      protocol: 1,
      type: 'cleaned',
      executionCount: 5,
      models: { before: 2, after: 1 },
      freed: { cpu: 12_700_000 },
      allocated: null,
      reserved: null
    };
    const error = {
      protocol: 1,
      type: 'error',
      where: 'nvml',
      message: 'Driver Not Loaded'
    };
    for (const message of [
      hello,
      gpuSample(1, 2),
      c01Inventory(),
      cleaned,
      error
    ]) {
      const result = parseKernelMessage(message);
      expect(result).toEqual({ ok: true, message });
    }
  });

  it.each([
    ['not an object', 'hello'],
    ['an array', [1, 2]],
    ['null', null],
    ['another protocol version', { ...hello, protocol: 2 }],
    ['no protocol', { ...hello, protocol: undefined }],
    ['an unknown type', { ...hello, type: 'bye' }],
    ['a wrong field type', { ...hello, pid: '4242' }],
    ['a missing field', { ...hello, devices: undefined }],
    [
      'negative bytes',
      {
        ...gpuSample(1, 2),
        devices: [{ ...gpuSample(1, 2).devices[0], used: -1 }]
      }
    ],
    [
      'bytes beyond 2^53',
      {
        ...gpuSample(1, 2),
        devices: [{ ...gpuSample(1, 2).devices[0], total: 2 ** 60 }]
      }
    ],
    ['a NaN time', { ...gpuSample(1, 2), t: NaN }],
    [
      'an unknown holder kind',
      {
        ...c01Inventory(),
        models: [
          { ...c01Inventory().models[0], holders: [{ kind: 'x', name: 'a' }] }
        ]
      }
    ],
    [
      'an unknown family',
      {
        ...c01Inventory(),
        models: [{ ...c01Inventory().models[0], family: 'jax' }]
      }
    ]
  ])('rejects %s with a reason', (_, data) => {
    const result = parseKernelMessage(data);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.reason.length).toBeGreaterThan(0);
    }
  });

  it('never throws on 1000 fuzzed messages', () => {
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const junk = (depth: number): unknown => {
      const pick = Math.floor(random() * 8);
      switch (pick) {
        case 0:
          return random() * 1e20 - 1e10;
        case 1:
          return 'x'.repeat(Math.floor(random() * 50));
        case 2:
          return null;
        case 3:
          return random() > 0.5;
        case 4:
          return depth > 3 ? [] : [junk(depth + 1), junk(depth + 1)];
        default: {
          if (depth > 3) {
            return {};
          }
          const base: Record<string, unknown> =
            random() > 0.3 ? { ...c01Inventory() } : {};
          base[
            ['protocol', 'type', 'models', 't', 'seq', 'devices'][pick % 6]
          ] = junk(depth + 1);
          return base;
        }
      }
    };
    let accepted = 0;
    for (let i = 0; i < 1000; i++) {
      const result = parseKernelMessage(junk(0));
      accepted += result.ok ? 1 : 0;
    }
    // Only a message that happens to stay valid is accepted; the point is that nothing throws.
    expect(accepted).toBeLessThan(1000);
  });
});
