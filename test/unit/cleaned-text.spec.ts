import { nullTranslator } from '@jupyterlab/translation';
import { describeCleaned } from '../../src/notifications/text';
import type { IAllocator, ICleaned } from '../../src/protocol';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;

function cleaned(freed: number): ICleaned {
  return {
    protocol: 2,
    type: 'cleaned',
    executionCount: 7,
    models: { before: 2, after: 2 },
    freed: freed ? { 'cuda:0': freed } : {},
    allocated: { 'cuda:0': { before: 2048 * MiB, after: 2048 * MiB - freed } },
    reserved: { 'cuda:0': { before: 3120 * MiB, after: 2096 * MiB } }
  };
}

const allocator = (expandableSegments: boolean): IAllocator => ({
  expandableSegments,
  devices: [
    {
      index: 0,
      reserved: 2096 * MiB,
      allocated: 2000 * MiB,
      active: 2000 * MiB,
      inactiveSplit: 96 * MiB,
      releasable: 0,
      segments: 12,
      allocRetries: 0
    }
  ]
});

describe('describeCleaned explains a small "freed"', () => {
  it('models freed 0 B: what empty_cache returned, what stays fragmented and held', () => {
    const text = describeCleaned(
      cleaned(0),
      trans,
      undefined,
      allocator(false)
    );
    expect(text).toBe(
      "Clean GPU freed 0 B of models (2 → 2 live); returned 1.0 GiB of PyTorch's cache; 96.0 MiB stays fragmented, 2.0 GiB in live tensors."
    );
    expect(text.length).toBeLessThanOrEqual(140);
  });

  it('without the allocator fact (or with expandable segments): no fragmented part', () => {
    expect(describeCleaned(cleaned(0), trans)).toBe(
      "Clean GPU freed 0 B of models (2 → 2 live); returned 1.0 GiB of PyTorch's cache; 2.0 GiB stays in live tensors."
    );
    expect(
      describeCleaned(cleaned(0), trans, undefined, allocator(true))
    ).not.toContain('fragmented');
  });

  it('models freed something: the figures as before, then the fragmented part', () => {
    expect(
      describeCleaned(
        cleaned(12 * MiB),
        trans,
        { before: 2, after: 1 },
        allocator(false)
      )
    ).toBe(
      'Clean GPU freed 12.0 MiB of models (2 → 1 live). PyTorch allocated −12.0 MiB, reserved −1.0 GiB. 96.0 MiB stays fragmented.'
    );
  });

  it('on the CPU (no torch figures) it stays the models line', () => {
    expect(
      describeCleaned(
        { ...cleaned(0), allocated: null, reserved: null },
        trans,
        undefined,
        null
      )
    ).toBe('Clean GPU freed 0 B of models (2 → 2 live).');
  });
});

describe('describeCleaned never lets its two counts contradict (issue 28, item 1)', () => {
  it('fewer live models but 0 B freed: their tensors stay, held by another name', () => {
    const text = describeCleaned(
      { ...cleaned(0), allocated: null, reserved: null },
      trans,
      { before: 1, after: 0 },
      null
    );
    expect(text).toBe(
      'Clean GPU freed 0 B of models (1 → 0 live). Their tensors stay: another name holds them (the VRAM panel says which).'
    );
    expect(text.length).toBeLessThanOrEqual(140);
  });

  it('more live models after than before: a part now counts on its own', () => {
    const text = describeCleaned(
      { ...cleaned(12 * MiB), allocated: null, reserved: null },
      trans,
      { before: 1, after: 2 },
      null
    );
    expect(text).toBe(
      "Clean GPU freed 12.0 MiB of models (1 → 2 live). A model's part (a trainer's EMA copy) now counts as a model of its own."
    );
  });

  it('the explanation is left out where it would not fit the toast', () => {
    const text = describeCleaned(
      cleaned(0),
      trans,
      { before: 2, after: 1 },
      allocator(false)
    );
    expect(text).toBe(
      "Clean GPU freed 0 B of models (2 → 1 live); returned 1.0 GiB of PyTorch's cache; 96.0 MiB stays fragmented, 2.0 GiB in live tensors."
    );
  });
});
