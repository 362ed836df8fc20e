import {
  deletableNames,
  holderRows,
  modelKind
} from '../../src/analysis/holders';
import type { IInventory } from '../../src/protocol';
import { c01Inventory, yolo } from './fixtures';

const MiB = 2 ** 20;

function inventory(): IInventory {
  return {
    ...c01Inventory(),
    models: [
      yolo({
        id: 'small',
        order: 1,
        bytes: { 'cuda:0': 12 * MiB },
        holders: [{ kind: 'output', name: 'Out[2]' }],
        stale: true
      }),
      yolo({
        id: 'big',
        order: 2,
        label: 'YOLO (yolov8x.pt)',
        bytes: { 'cuda:0': 260 * MiB, cpu: 4 * MiB },
        holders: [
          { kind: 'output', name: '_' },
          { kind: 'variable', name: 'model' },
          { kind: 'variable', name: 'model' }
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
        holders: [{ kind: 'variable', name: 'a b' }]
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
        { kind: 'variable', name: 'model' },
        { kind: 'variable', name: 'model' },
        { kind: 'variable', name: 'a b' },
        { kind: 'variable', name: 'x; import os' },
        { kind: 'variable', name: 'class' },
        { kind: 'output', name: '_' },
        { kind: 'variable', name: 'net_2' }
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
