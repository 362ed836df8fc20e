import { findings } from '../../../src/analysis/findings';
import { namedOlderModelRule } from '../../../src/analysis/findings/named-older-model';
import { userModels } from '../../../src/analysis/findings/user-models';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import { c01Inventory, held, yolo } from '../fixtures';
import { cycleLayers, facts, inventoryOf, MiB, trans } from './helpers';

const older = (overrides = {}) =>
  yolo({ id: '0x1', order: 1, holders: [held('variable', 'm')], ...overrides });
const newer = () =>
  yolo({
    id: '0x2',
    order: 2,
    label: 'YOLO (yolov8s.yaml)',
    holders: [held('variable', 'model')]
  });

describe('named-older-model', () => {
  it('names the variable that still holds the older model; Delete m… asks', () => {
    const [finding] = namedOlderModelRule(
      facts(inventoryOf([older(), newer()]))
    );
    expect(finding).toMatchObject({
      kind: 'named-older-model',
      severity: 'info',
      subject: 'm',
      fix: { kind: 'delete', modelId: '0x1', names: ['m'] },
      stack: 'ultralytics'
    });
    expect(finding.explain(trans)).toBe(
      'm still holds YOLO (yolov8n.yaml), 12.1 MiB, while a newer YOLO (yolov8s.yaml) is loaded.'
    );
  });

  it('a stale older model is the stale-model finding instead (12 MiB of RAM: an info)', () => {
    const list = findings(facts(c01Inventory()));
    expect(list.map(f => [f.kind, f.severity])).toEqual([
      ['stale-model', 'info']
    ]);
  });

  it('a name that is not an identifier, or held through a path: no button', () => {
    const [finding] = namedOlderModelRule(
      facts(
        inventoryOf([
          older({ holders: [held('variable', 'runs', 'runs[0]')] }),
          newer()
        ])
      )
    );
    expect(finding.fix).toEqual({ kind: 'none' });
  });

  it('parts of a trained model are not a second model', () => {
    // The trainer's EMA copy, touched by a list and a loop variable, is
    // reached through `model`: a part.
    const ema = yolo({
      id: '0x3',
      order: 3,
      className: 'DetectionModel',
      module: 'ultralytics.nn.tasks',
      label: 'DetectionModel',
      bytes: { 'cuda:0': 12 * MiB },
      holders: [
        held('variable', 'model', 'model.trainer.ema.ema'),
        held('variable', 'ckpts', 'ckpts[0]'),
        held('variable', 'm', 'm')
      ]
    });
    const model = yolo({ id: '0x1', order: 1 });
    const inventory = inventoryOf([model, ema]);
    expect(findStackedModels(inventory)).toEqual([]);
    expect(userModels(inventory).map(m => m.id)).toEqual(['0x1']);
    expect(namedOlderModelRule(facts(inventory))).toEqual([]);
  });

  it('a list touching a model part, without the model, is still one model', () => {
    const part = yolo({
      id: '0x4',
      order: 4,
      className: 'Conv',
      label: 'Conv',
      holders: [
        held('variable', 'model', 'model.model.model[0]'),
        held('variable', 'layers', 'layers[0]')
      ]
    });
    const inventory = inventoryOf([yolo({ id: '0x1', order: 1 }), part]);
    expect(findStackedModels(inventory)).toEqual([]);
  });

  it('two models that reference each other both stay models', () => {
    const a = yolo({
      id: '0xa',
      order: 1,
      holders: [held('variable', 'a'), held('variable', 'b', 'b.peer')]
    });
    const b = yolo({
      id: '0xb',
      order: 2,
      holders: [held('variable', 'b'), held('variable', 'a', 'a.peer')]
    });
    expect(userModels(inventoryOf([a, b])).map(m => m.id)).toEqual([
      '0xa',
      '0xb'
    ]);
  });

  it('modules of a collected model never make a stack', () => {
    expect(
      namedOlderModelRule(facts(inventoryOf([...cycleLayers(), newer()])))
    ).toEqual([]);
  });
});
