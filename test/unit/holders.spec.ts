import {
  deletableNames,
  formatShape,
  holderRows,
  modelKind,
  rootsSummary,
  tensorRows
} from '../../src/analysis/memory/holders';
import { userModels } from '../../src/analysis/findings/user-models';
import type { IInventory } from '../../src/protocol';
import { c01Inventory, c08Inventory, held, yolo } from './fixtures';

const MiB = 2 ** 20;

function inventory(): IInventory {
  return {
    ...c01Inventory(),
    models: [
      yolo({
        id: 'small',
        order: 1,
        bytes: { 'cuda:0': 12 * MiB },
        holders: [{ kind: 'output', name: 'Out[2]', path: 'Out[2]' }],
        stale: true
      }),
      yolo({
        id: 'big',
        order: 2,
        label: 'YOLO (yolov8x.pt)',
        bytes: { 'cuda:0': 260 * MiB, cpu: 4 * MiB },
        holders: [
          { kind: 'output', name: '_', path: '_' },
          { kind: 'variable', name: 'model', path: 'model' },
          { kind: 'variable', name: 'model', path: 'model' }
        ]
      }),
      yolo({
        id: 'gan',
        order: 3,
        className: 'Generator',
        module: '__main__',
        family: 'torch',
        label: 'Generator',
        bytes: { 'cuda:0': 40 * MiB },
        holders: [{ kind: 'variable', name: 'a b', path: 'a b' }]
      })
    ]
  };
}

describe('holderRows', () => {
  it('sorts by bytes, largest first, by default', () => {
    const rows = holderRows(inventory());
    expect(rows.map(r => r.model.id)).toEqual(['big', 'gan', 'small']);
    expect(rows[0]).toMatchObject({
      holders: ['model', '_'],
      kind: 'YOLO',
      bytes: 264 * MiB,
      cudaBytes: 260 * MiB,
      state: 'named',
      deletable: ['model']
    });
    expect(rows[2]).toMatchObject({ state: 'stale', deletable: [] });
  });

  it('sorts by each column, both ways', () => {
    const ids = (key: any, direction: any) =>
      holderRows(inventory(), { key, direction }).map(r => r.model.id);
    expect(ids('bytes', 'asc')).toEqual(['small', 'gan', 'big']);
    expect(ids('holder', 'asc')).toEqual(['gan', 'big', 'small']); // "a b", "model", "Out[2]"
    expect(ids('kind', 'asc')).toEqual(['gan', 'big', 'small']); // Generator < YOLO, then bytes
    expect(ids('state', 'desc')).toEqual(['small', 'big', 'gan']); // stale first, then bytes
  });

  it('has no rows without an inventory', () => {
    expect(holderRows(null)).toEqual([]);
  });
});

describe('deletableNames', () => {
  it('keeps only Python identifiers, once each', () => {
    const model = yolo({
      holders: [
        { kind: 'variable', name: 'model', path: 'model' },
        { kind: 'variable', name: 'model', path: 'model' },
        { kind: 'variable', name: 'a b', path: 'a b' },
        { kind: 'variable', name: 'x; import os', path: 'x; import os' },
        { kind: 'variable', name: 'class', path: 'class' },
        { kind: 'output', name: '_', path: '_' },
        { kind: 'variable', name: 'net_2', path: 'net_2' }
      ]
    });
    expect(deletableNames(model)).toEqual(['model', 'net_2']);
  });

  it('names Ultralytics models YOLO and others by class', () => {
    expect(modelKind(yolo())).toBe('YOLO');
    expect(modelKind(yolo({ family: 'torch', className: 'ResNet' }))).toBe(
      'ResNet'
    );
  });
});

describe('protocol 2: paths, parts, roots', () => {
  it('lists paths (direct names first) and parts with their bytes', () => {
    const [row] = holderRows(c08Inventory());
    expect(row.paths).toEqual(['model', 'runs[0].model']);
    expect(row.holders).toEqual(['model', 'runs']);
    expect(row.parts.map(p => [p.path, p.kind, p.bytes])).toEqual([
      ['trainer.ema.ema', 'model', 12 * MiB],
      ['trainer.optimizer', 'optimizer', 6 * MiB]
    ]);
    expect(row.partBytes).toBe(18 * MiB);
    // `del runs` would delete more than the model: only `model` is offered.
    expect(row.deletable).toEqual(['model']);
    expect(
      deletableNames(yolo({ holders: [held('variable', 'runs', 'runs[0]')] }))
    ).toEqual([]);
  });

  it('sums roots and unattributed to PyTorch allocated on one device', () => {
    const inventory = c08Inventory();
    inventory.roots.push({
      kind: 'output',
      name: 'Out[4]',
      bytes: { cpu: 5 * MiB },
      models: 0,
      tensors: 1
    });
    const gpu = rootsSummary(inventory, 'cuda:0')!;
    expect(gpu.rows.map(r => r.name)).toEqual([
      'val_losses',
      'last traceback (train_step)',
      'model'
    ]);
    expect(gpu.unattributed).toBe(32 * MiB);
    expect(gpu.total).toBe(1024 * MiB + 256 * MiB + 30 * MiB + 32 * MiB);
    // Without a GPU: every device together, no unattributed figure.
    const all = rootsSummary(inventory, null)!;
    expect(all.rows.map(r => r.name)).toContain('Out[4]');
    expect(all.unattributed).toBeNull();
    // A device the agent has no unattributed figure for.
    expect(rootsSummary(inventory, 'cuda:1')).toEqual({
      device: 'cuda:1',
      rows: [],
      unattributed: null,
      total: 0
    });
    expect(rootsSummary(null, 'cuda:0')).toBeNull();
  });

  it('counts models the way the gauge and the findings do (issue 28, item 6)', () => {
    // 57 layers that outlived their model in a reference cycle: the agent
    // lists 57 modules under the "nothing named" row; they are no models
    const layers = Array.from({ length: 57 }, (_, i) =>
      yolo({
        id: `layer-${i}`,
        order: 10 + i,
        className: 'Conv',
        family: 'torch',
        bytes: { 'cuda:0': MiB },
        holders: [
          {
            kind: 'hidden',
            name: 'unreachable from the namespace',
            path: 'unreachable from the namespace'
          }
        ],
        stale: true
      })
    );
    const base = inventory();
    const data: IInventory = {
      ...base,
      models: [...base.models, ...layers],
      roots: [
        {
          kind: 'hidden',
          name: 'unreachable from the namespace',
          bytes: { 'cuda:0': 57 * MiB },
          models: 57,
          tensors: 0
        },
        // the agent counts every module the root reaches (the YOLO and its
        // DetectionModel): one model of the user's
        {
          kind: 'variable',
          name: 'model',
          bytes: { 'cuda:0': 260 * MiB },
          models: 2,
          tensors: 0
        },
        {
          kind: 'output',
          name: 'Out[2]',
          bytes: { 'cuda:0': 12 * MiB },
          models: 1,
          tensors: 0
        }
      ]
    };
    const rows = rootsSummary(data, 'cuda:0')!.rows;
    expect(rows.map(r => [r.name, r.models])).toEqual([
      ['model', 1],
      ['unreachable from the namespace', 0],
      ['Out[2]', 1]
    ]);
    // the same figure as the gauge's "Live models": the user's models
    expect(userModels(data).map(m => m.id)).toEqual(
      expect.arrayContaining(['small', 'big'])
    );
    expect(userModels(data).some(m => m.id.startsWith('layer-'))).toBe(false);
  });

  it('filters loose tensors by device and formats shapes', () => {
    expect(tensorRows(c08Inventory(), 'cuda:0')).toHaveLength(1);
    expect(tensorRows(c08Inventory(), 'cuda:1')).toEqual([]);
    expect(formatShape([256, 1024, 1024])).toBe('256×1024×1024');
    expect(formatShape([])).toBe('scalar');
  });
});
