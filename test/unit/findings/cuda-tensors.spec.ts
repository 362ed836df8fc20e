import { cudaTensorsRule } from '../../../src/analysis/findings/cuda-tensors';
import { c08Inventory } from '../fixtures';
import type { IInventory } from '../../../src/protocol';
import { facts, inventoryOf, MiB, trans } from './helpers';

describe('cuda-tensors', () => {
  it('a variable with CUDA tensors and no model is info, no button', () => {
    const inventory: IInventory = {
      ...inventoryOf([]),
      roots: [
        {
          kind: 'variable' as const,
          name: 'results',
          bytes: { 'cuda:0': 96 * MiB },
          models: 0,
          tensors: 30
        },
        {
          kind: 'variable' as const,
          name: 'on_cpu',
          bytes: { cpu: 96 * MiB },
          models: 0,
          tensors: 3
        }
      ]
    };
    const list = cudaTensorsRule(facts(inventory));
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      kind: 'cuda-tensors',
      severity: 'info',
      subject: 'results',
      fix: { kind: 'none' }
    });
    expect(list[0].explain(trans)).toBe(
      'results holds 30 tensors outside any model: 96.0 MiB on cuda:0. Delete it or move them to the CPU when done.'
    );
  });

  it('C08: graph holders and roots with models are other findings', () => {
    expect(cudaTensorsRule(facts(c08Inventory()))).toEqual([]);
  });
});
