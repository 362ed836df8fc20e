import {
  outputCell,
  outputTensorsRule
} from '../../../src/analysis/findings/output-tensors';
import type { IRootBytes } from '../../../src/protocol';
import { c01Inventory } from '../fixtures';
import { facts, inventoryOf, MiB, trans } from './helpers';

const root = (
  name: string,
  bytes: Record<string, number>,
  tensors = 1
): IRootBytes => ({
  kind: 'output',
  name,
  bytes,
  models: 0,
  tensors
});

describe('output-tensors', () => {
  it('names the cell from Out[N] / _N; _, __, ___ are evidence of a recent cell', () => {
    const inventory = {
      ...inventoryOf([]),
      roots: [
        root('_4', { 'cuda:0': 64 * MiB }),
        root('Out[4]', { 'cuda:0': MiB }),
        root('_', { 'cuda:0': 64 * MiB }),
        root('__', { 'cuda:0': 64 * MiB }, 2)
      ]
    };
    const list = outputTensorsRule(facts(inventory));
    expect(list.map(f => [f.id, f.subject, f.evidence])).toEqual([
      ['output-tensors:4', '_4, Out[4]', ['_4', 'Out[4]']],
      ['output-tensors:_', '_, __', ['_', '__']]
    ]);
    expect(list[0]).toMatchObject({
      severity: 'warning',
      bytes: { 'cuda:0': 65 * MiB },
      fix: { kind: 'clean', plan: {} }
    });
    expect(list[0].explain(trans)).toBe(
      'The displayed output of cell [4] (_4, Out[4]) keeps 2 tensors alive (65.0 MiB) that no variable names. Clean GPU drops them from the output cache.'
    );
    expect(list[1].explain(trans)).toContain(
      'The displayed output of a recent cell (_, __) keeps 3 tensors'
    );
  });

  it('an output that holds a model is not this finding (C01)', () => {
    expect(outputTensorsRule(facts(c01Inventory()))).toEqual([]);
  });

  it('on the CPU it is info', () => {
    const inventory = { ...inventoryOf([]), roots: [root('_2', { cpu: MiB })] };
    expect(outputTensorsRule(facts(inventory))[0].severity).toBe('info');
  });

  it('outputCell', () => {
    expect(outputCell('Out[12]')).toBe(12);
    expect(outputCell('_3')).toBe(3);
    expect(outputCell('_')).toBeNull();
    expect(outputCell('__')).toBeNull();
  });
});
