import {
  findStackedModels,
  stackingKey,
  stackingSignature
} from '../../src/analysis/memory/stacking';
import { c01Inventory, yolo } from './fixtures';

describe('findStackedModels', () => {
  it('finds the re-run YOLO of case C01, older first', () => {
    const groups = findStackedModels(c01Inventory());
    expect(groups).toHaveLength(1);
    expect(groups[0].key).toBe('ultralytics');
    expect(groups[0].older.map(m => m.order)).toEqual([1]);
    expect(groups[0].newest.order).toBe(2);
  });

  it('does not warn for a single instance (C01 control: cell ends with ";")', () => {
    const inventory = { ...c01Inventory(), models: [yolo()] };
    expect(findStackedModels(inventory)).toEqual([]);
  });

  it('stacks ultralytics models of different sizes, and plain torch only by class', () => {
    const inventory = {
      ...c01Inventory(),
      models: [
        yolo({ id: 'a', order: 1, label: 'YOLO (yolov8n.yaml)' }),
        yolo({ id: 'b', order: 4, label: 'YOLO (yolov8s.yaml)' }),
        yolo({
          id: 'g',
          order: 2,
          family: 'torch',
          className: 'Generator',
          module: 'gan'
        }),
        yolo({
          id: 'd',
          order: 3,
          family: 'torch',
          className: 'Discriminator',
          module: 'gan'
        })
      ]
    };
    const groups = findStackedModels(inventory);
    expect(groups.map(g => g.key)).toEqual(['ultralytics']);
    expect(stackingKey(inventory.models[2])).toBe('torch:gan.Generator');
  });

  it('gives the same signature for the same instances only', () => {
    const a = stackingSignature(findStackedModels(c01Inventory()));
    const b = stackingSignature(findStackedModels(c01Inventory()));
    const changed = c01Inventory();
    changed.models[1].id = 'other';
    expect(a).toBe(b);
    expect(stackingSignature(findStackedModels(changed))).not.toBe(a);
  });
});
