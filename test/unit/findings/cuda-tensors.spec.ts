import { cudaTensorsRule } from '../../../src/analysis/findings/cuda-tensors';
import { c08Inventory } from '../fixtures';
import type { IInventory } from '../../../src/protocol';
import { facts, inventoryOf, MiB, trans } from './helpers';

describe('cuda-tensors', () => {
  it('an older agent (no sole): a variable with CUDA tensors and no model is info, Move to CPU…', () => {
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
      bytes: { 'cuda:0': 96 * MiB },
      fix: { kind: 'tensors', name: 'results' }
    });
    expect(list[0].explain(trans)).toBe(
      'results holds 30 tensors outside any model: 96.0 MiB on cuda:0. Move them to the CPU or delete it when done.'
    );
  });

  it('C08: graph holders and roots with models are other findings', () => {
    expect(cudaTensorsRule(facts(c08Inventory()))).toEqual([]);
  });

  const variable = (
    name: string,
    sole: Record<string, number>,
    shared: Record<string, number>,
    sharedWith: string[],
    tensors = 0
  ) => ({
    kind: 'variable' as const,
    name,
    bytes: sole,
    sole,
    shared,
    sharedWith,
    models: 0,
    tensors
  });

  it('storage shared by results and last = results[-1] is shown as shared, given to neither', () => {
    const inventory: IInventory = {
      ...inventoryOf([]),
      roots: [
        variable(
          'results',
          { 'cuda:0': 24 * MiB },
          { 'cuda:0': 12 * MiB },
          ['last'],
          3
        ),
        variable('last', {}, { 'cuda:0': 12 * MiB }, ['results'])
      ]
    };
    const [results, last] = cudaTensorsRule(facts(inventory));
    expect(results).toMatchObject({
      subject: 'results',
      bytes: { 'cuda:0': 24 * MiB },
      sharedBytes: { 'cuda:0': 12 * MiB },
      sharedWith: ['last'],
      evidence: ['results', 'last'],
      fix: { kind: 'tensors', name: 'results' }
    });
    expect(results.explain(trans)).toBe(
      'results holds 3 tensors outside any model: 24.0 MiB on cuda:0. Move them to the CPU or delete it when done. 12.0 MiB more is shared with last and stays while last holds it.'
    );
    // all of last is shared: listed, but nothing to offer (it alone frees 0 B)
    expect(last).toMatchObject({
      subject: 'last',
      bytes: {},
      sharedBytes: { 'cuda:0': 12 * MiB },
      fix: { kind: 'none' }
    });
    expect(last.explain(trans)).toBe(
      'last holds CUDA tensors outside any model (12.0 MiB on cuda:0), all shared with results: deleting or moving last alone frees nothing.'
    );
  });

  it('a list that merely holds a model’s parameters keeps no bytes of its own: no finding', () => {
    const inventory: IInventory = {
      ...inventoryOf([]),
      roots: [
        {
          kind: 'variable' as const,
          name: 'params',
          bytes: {},
          sole: {},
          shared: {},
          sharedWith: [],
          models: 0,
          tensors: 0
        }
      ]
    };
    expect(cudaTensorsRule(facts(inventory))).toEqual([]);
  });

  it('a name that is not an identifier gets no button', () => {
    const inventory: IInventory = {
      ...inventoryOf([]),
      roots: [variable('a b', { 'cuda:0': MiB }, {}, [], 1)]
    };
    expect(cudaTensorsRule(facts(inventory))[0].fix).toEqual({ kind: 'none' });
  });
});
