import {
  outputCell,
  outputTensorsRule
} from '../../../src/analysis/findings/output-tensors';
import type { IRootBytes } from '../../../src/protocol';
import { planClean } from '../../../src/analysis/codegen/clean-cell';
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
  it('an older agent (no cells): the cell from Out[N] / _N; _, __, ___ are a recent cell', () => {
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
    // without `sole` the names of one object keep the same bytes: the largest
    expect(list[0]).toMatchObject({
      severity: 'warning',
      bytes: { 'cuda:0': 64 * MiB },
      fix: { kind: 'clean', plan: {} }
    });
    expect(list[0].explain(trans)).toBe(
      'The displayed output of cell [4] (_4, Out[4]) keeps 1 tensor alive, 64.0 MiB, that no variable names. Clean GPU drops it from the output cache.'
    );
    expect(list[1].explain(trans)).toContain(
      'The displayed output of a recent cell (_, __) keeps 2 tensors'
    );
  });

  it('an output that holds a model is not this finding (C01)', () => {
    expect(outputTensorsRule(facts(c01Inventory()))).toEqual([]);
  });

  it('on the CPU it is info, and offers no Clean GPU (its plan leaves RAM)', () => {
    const inventory = { ...inventoryOf([]), roots: [root('_2', { cpu: MiB })] };
    const [finding] = outputTensorsRule(facts(inventory));
    expect(finding.severity).toBe('info');
    expect(finding.fix).toEqual({ kind: 'none' });
    expect(finding.explain(trans)).toContain(
      'keeps tensors alive in RAM, 1.0 MiB'
    );
    // the plan indeed leaves it: nothing to drop
    expect(planClean(inventory).outKeys).toEqual([]);
  });

  it('outputCell', () => {
    expect(outputCell('Out[12]')).toBe(12);
    expect(outputCell('_3')).toBe(3);
    expect(outputCell('_')).toBeNull();
    expect(outputCell('__')).toBeNull();
  });

  /** An output root as the agent reports it with `cells`, `sole` and `shared`. */
  const out = (
    name: string,
    cells: number[],
    sole: Record<string, number>,
    extra: Partial<IRootBytes> = {}
  ): IRootBytes => ({
    kind: 'output',
    name,
    bytes: {},
    sole,
    shared: {},
    sharedWith: [],
    cells,
    models: 0,
    tensors: 0,
    ...extra
  });

  it('one finding per cell from `cells`: _ is cell [7], bytes are the sole bytes once', () => {
    const sole = { 'cuda:0': 64 * MiB };
    const inventory = {
      ...inventoryOf([]),
      roots: [
        out('_', [7], sole, { bytes: sole, tensors: 2 }),
        out('_7', [7], sole),
        out('Out[7]', [7], sole)
      ]
    };
    const [finding, ...rest] = outputTensorsRule(facts(inventory));
    expect(rest).toEqual([]);
    expect(finding).toMatchObject({
      id: 'output-tensors:7',
      severity: 'warning',
      subject: '_, _7, Out[7]',
      bytes: { 'cuda:0': 64 * MiB },
      evidence: ['_', '_7', 'Out[7]'],
      fix: { kind: 'clean', plan: {} }
    });
    expect(finding.sharedBytes).toBeUndefined();
    expect(finding.explain(trans)).toBe(
      'The displayed output of cell [7] (_, _7, Out[7]) keeps 2 tensors alive, 64.0 MiB, that no variable names. Clean GPU drops them from the output cache.'
    );
  });

  it('a tensor a variable also names and displays is no finding (no 0 B fix)', () => {
    const shared = { 'cuda:0': 16 * MiB };
    const inventory = {
      ...inventoryOf([]),
      roots: [
        {
          kind: 'variable' as const,
          name: 'x',
          bytes: shared,
          sole: {},
          shared,
          sharedWith: ['_'],
          models: 0,
          tensors: 1
        },
        out('_', [4], {}, { shared, sharedWith: ['x'] }),
        out('_4', [4], {}, { shared, sharedWith: ['x'] }),
        out('Out[4]', [4], {}, { shared, sharedWith: ['x'] })
      ]
    };
    expect(outputTensorsRule(facts(inventory))).toEqual([]);
  });

  it('shared storage is shown as shared, not given to the cell', () => {
    const inventory = {
      ...inventoryOf([]),
      roots: [
        out(
          'Out[3]',
          [3],
          { 'cuda:0': 8 * MiB },
          {
            shared: { 'cuda:0': 4 * MiB },
            sharedWith: ['last'],
            tensors: 3
          }
        )
      ]
    };
    const [finding] = outputTensorsRule(facts(inventory));
    expect(finding.bytes).toEqual({ 'cuda:0': 8 * MiB });
    expect(finding.sharedBytes).toEqual({ 'cuda:0': 4 * MiB });
    expect(finding.sharedWith).toEqual(['last']);
    expect(finding.explain(trans)).toContain(
      '4.0 MiB more is shared with last and stays.'
    );
  });

  it('hidden copies no Out entry names (del Out[N], %reset -f out) are one finding each', () => {
    const inventory = {
      ...inventoryOf([]),
      roots: [
        out(
          '__',
          [],
          { 'cuda:0': 128 * MiB },
          { bytes: { 'cuda:0': 128 * MiB }, tensors: 1 }
        ),
        out('_2', [], { 'cuda:0': 4 * MiB }),
        out('Out[5]', [5], { cpu: MiB }, { bytes: { cpu: MiB }, tensors: 1 })
      ]
    };
    const list = outputTensorsRule(facts(inventory));
    expect(list.map(f => [f.id, f.severity, f.subject])).toEqual([
      ['output-tensors:5', 'info', 'Out[5]'],
      // one scale: 128 MiB of VRAM is a warning, 4 MiB an info
      ['output-tensors:copy:__', 'warning', '__'],
      ['output-tensors:copy:_2', 'info', '_2']
    ]);
    expect(list[1].explain(trans)).toBe(
      'A hidden copy in the output cache (__) keeps 1 tensor alive, 128.0 MiB, that no variable names. Clean GPU drops it from the output cache.'
    );
    expect(list[2].explain(trans)).toBe(
      'A hidden copy in the output cache (_2) keeps tensors alive, 4.0 MiB, that no variable names. Clean GPU drops them from the output cache.'
    );
  });

  it('one object shown by two cells (cell [8] was `_`) is one finding for both', () => {
    const sole = { 'cuda:0': 2 * MiB };
    const inventory = {
      ...inventoryOf([]),
      roots: [out('Out[7]', [7, 8], sole), out('Out[8]', [7, 8], sole)]
    };
    const [finding] = outputTensorsRule(facts(inventory));
    expect(finding.id).toBe('output-tensors:7,8');
    expect(finding.bytes).toEqual(sole);
    expect(finding.explain(trans)).toContain(
      'The displayed output of cells [7], [8] (Out[7], Out[8])'
    );
  });
});

describe('output-tensors beside an output-cache graph holder (agent 0.12.0)', () => {
  it('an output whose graphs are a graph-holder finding is not told twice', () => {
    const inventory = {
      ...inventoryOf([]),
      roots: [
        { ...root('Out[4]', { 'cuda:0': 64 * MiB }), cells: [4] },
        { ...root('_4', {}), cells: [4] },
        { ...root('Out[5]', { 'cuda:0': 8 * MiB }), cells: [5] }
      ],
      graphs: [
        {
          name: 'Out[4]',
          path: 'Out[4]',
          container: 'tensor' as const,
          count: 1,
          gradFn: 'DivBackward0',
          bytes: { 'cuda:0': 64 * MiB },
          nodes: 40,
          truncated: false,
          root: 'output' as const,
          names: ['Out[4]', '_4'],
          valueId: '0x7f00aa'
        }
      ]
    };
    expect(outputTensorsRule(facts(inventory)).map(f => f.id)).toEqual([
      'output-tensors:5'
    ]);
    // under 1 MiB of graphs the graph holder is no finding: the output's is
    inventory.graphs[0].bytes = { 'cuda:0': 1024 };
    expect(outputTensorsRule(facts(inventory)).map(f => f.id)).toEqual([
      'output-tensors:4',
      'output-tensors:5'
    ]);
  });
});
