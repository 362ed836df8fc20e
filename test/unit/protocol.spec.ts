import { parseKernelMessage, PROTOCOL_VERSION } from '../../src/protocol';
import {
  c01Inventory,
  c08Inventory,
  gpuSample,
  graphHolder,
  oomMessage
} from './fixtures';

const hello = {
  protocol: 2,
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
  it('is version 2', () => {
    expect(PROTOCOL_VERSION).toBe(2);
  });

  it('accepts every message kind of protocol 2', () => {
    const cleaned = {
      protocol: 2,
      type: 'cleaned',
      executionCount: 5,
      models: { before: 2, after: 1 },
      freed: { cpu: 12_700_000 },
      allocated: null,
      reserved: null
    };
    const error = {
      protocol: 2,
      type: 'error',
      where: 'nvml',
      message: 'Driver Not Loaded'
    };
    const helloGpu = {
      ...hello,
      torch: '2.14.1',
      nvml: true,
      nvmlError: null,
      devices: [
        {
          index: 0,
          nvmlIndex: 3,
          name: 'NVIDIA H200',
          total: 150_754_820_096,
          uuid: 'GPU-1'
        }
      ]
    };
    const hidden = gpuSample(1, 2);
    hidden.devices[0] = {
      ...hidden.devices[0],
      process: null,
      nonTorch: null,
      processHidden: true
    };
    for (const message of [
      hello,
      helloGpu,
      gpuSample(1, 2),
      hidden,
      c01Inventory(),
      c08Inventory(),
      { ...c08Inventory(), skipped: true },
      cleaned,
      oomMessage(),
      oomMessage({
        executionCount: null,
        device: null,
        requested: null,
        free: null,
        total: null,
        process: null,
        allocated: null,
        reserved: null,
        torch: null,
        processes: [{ pid: 77, used: null }],
        stale: [{ id: '0x1', label: '<img src=x onerror=alert(1)>', bytes: 1 }],
        ultralytics: '8.4.190'
      }),
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
    ['another protocol version', { ...hello, protocol: 3 }],
    ['a version 1 hello', { ...hello, protocol: 1 }],
    [
      'a version 1 inventory (no roots, tensors, graphs, paths, parts)',
      {
        ...c01Inventory(),
        protocol: 1,
        skipped: undefined,
        roots: undefined,
        unattributed: undefined,
        tensors: undefined,
        graphs: undefined
      }
    ],
    [
      'a version 1 shaped inventory under protocol 2',
      { ...c01Inventory(), roots: undefined, graphs: undefined }
    ],
    [
      'a holder without a path',
      {
        ...c01Inventory(),
        models: [
          {
            ...c01Inventory().models[0],
            holders: [{ kind: 'variable', name: 'model' }]
          }
        ]
      }
    ],
    [
      'a model without parts',
      {
        ...c01Inventory(),
        models: [{ ...c01Inventory().models[0], parts: undefined }]
      }
    ],
    [
      'an unknown part kind',
      {
        ...c08Inventory(),
        models: [
          {
            ...c08Inventory().models[0],
            parts: [{ path: 'x', kind: 'scheduler', className: 'X', bytes: {} }]
          }
        ]
      }
    ],
    [
      'negative unattributed bytes',
      { ...c08Inventory(), unattributed: { 'cuda:0': -1 } }
    ],
    [
      'an unknown graph container',
      {
        ...c08Inventory(),
        graphs: [graphHolder({ container: 'deque' as any })]
      }
    ],
    [
      'a graph count that is not an integer',
      { ...c08Inventory(), graphs: [graphHolder({ count: 1.5 })] }
    ],
    [
      'too many loose tensors',
      {
        ...c08Inventory(),
        tensors: Array.from({ length: 1001 }, () => c08Inventory().tensors[0])
      }
    ],
    [
      'a tensor shape with a negative size',
      {
        ...c08Inventory(),
        tensors: [{ ...c08Inventory().tensors[0], shape: [-1] }]
      }
    ],
    [
      'a sample device without processHidden',
      {
        ...gpuSample(1, 2),
        devices: [{ ...gpuSample(1, 2).devices[0], processHidden: undefined }]
      }
    ],
    [
      'a hello device without nvmlIndex',
      {
        ...hello,
        devices: [{ index: 0, name: 'GPU', total: 1, uuid: null }]
      }
    ],
    ['an oom with a string traceback', oomMessage({ traceback: '1' as any })],
    [
      'an oom without versions',
      { ...oomMessage(), torch: undefined, ultralytics: undefined }
    ],
    [
      'an oom with a huge version string',
      oomMessage({ ultralytics: '8'.repeat(201) })
    ],
    ['an oom of protocol 1', { ...oomMessage(), protocol: 1 }],
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
          {
            ...c01Inventory().models[0],
            holders: [{ kind: 'x', name: 'a', path: 'a' }]
          }
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

describe('inventory owners (issue 17, item 4)', () => {
  const owner = {
    name: 'trainer',
    className: 'Trainer',
    holds: [
      {
        path: 'trainer.model',
        kind: 'model',
        id: '0x7f01',
        className: 'Sequential',
        parameters: 525312,
        bytes: { 'cuda:0': 4_202_496 },
        grads: { 'cuda:0': 2_101_248 }
      },
      {
        path: 'trainer.opt',
        kind: 'optimizer',
        className: 'AdamW',
        bytes: { 'cuda:0': 4_202_512 }
      }
    ]
  };

  it('accepts owners, and an inventory without them (an older agent)', () => {
    const parsed = parseKernelMessage({ ...c01Inventory(), owners: [owner] });
    expect(parsed.ok && parsed.message.type === 'inventory').toBe(true);
    expect(parseKernelMessage(c01Inventory()).ok).toBe(true);
  });

  it('rejects an owner holding of an unknown kind or negative bytes', () => {
    const bad = (holds: unknown[]) =>
      parseKernelMessage({
        ...c01Inventory(),
        owners: [{ ...owner, holds }]
      }).ok;
    expect(bad([{ ...owner.holds[1], kind: 'grad' }])).toBe(false);
    expect(bad([{ ...owner.holds[1], bytes: { cpu: -1 } }])).toBe(false);
  });
});

describe('sample: the floor between samples and the allocator cap (issue 15)', () => {
  const withDevice = (extra: Record<string, unknown>) => {
    const sample = gpuSample(1, 2);
    return { ...sample, devices: [{ ...sample.devices[0], ...extra }] };
  };

  it('accepts allocatedMin and limit as bytes or null, and a sample without them (an older agent)', () => {
    const parsed = parseKernelMessage(
      withDevice({ allocatedMin: 512, limit: 40 * 2 ** 30 })
    );
    expect(parsed.ok).toBe(true);
    if (parsed.ok && parsed.message.type === 'sample') {
      expect(parsed.message.devices[0].allocatedMin).toBe(512);
      expect(parsed.message.devices[0].limit).toBe(40 * 2 ** 30);
    }
    expect(
      parseKernelMessage(withDevice({ allocatedMin: null, limit: null })).ok
    ).toBe(true);
    expect(parseKernelMessage(gpuSample(1, 2)).ok).toBe(true);
  });

  it('rejects negative or fractional bytes', () => {
    expect(parseKernelMessage(withDevice({ allocatedMin: -1 })).ok).toBe(false);
    expect(parseKernelMessage(withDevice({ limit: 1.5 })).ok).toBe(false);
  });
});
