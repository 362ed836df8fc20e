/**
 * The inventories a real kernel sent after a finished Ultralytics training
 * (`test/fixtures/inventory_after_training.json`, written and kept current
 * by `test/agent/test_trained_model.py`) through the browser's one notion of
 * model, the stacking rule and every finding rule: the trainer's copies
 * (`trainer.model`, `trainer.ema.ema`, the predictor's backend) are parts,
 * never a second model, whatever else names or touches them.
 */
import { findings, userModels } from '../../../src/analysis/findings';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import { describeStacking } from '../../../src/notifications/text';
import type { IInventory } from '../../../src/protocol';
import steps from '../../fixtures/inventory_after_training.json';
import { c01Inventory } from '../fixtures';
import { facts, trans } from './helpers';

type Step = Partial<IInventory> & { step: string };

function inventoryAt(step: string): IInventory {
  const found = (steps as unknown as Step[]).find(s => s.step === step);
  if (!found) {
    throw new Error(`no step ${step} in the fixture`);
  }
  const inventory: Partial<IInventory> & { step?: string } = { ...found };
  delete inventory.step;
  return { ...c01Inventory(), ...inventory } as IInventory;
}

const ONE_MODEL = [
  'trained, result displayed',
  'trained again, results named',
  'predicted',
  'a name on the EMA copy',
  'a list of the layers',
  'a loop over the layers',
  'a name on the trainer'
];

describe('after a finished Ultralytics training (real inventories)', () => {
  it.each(ONE_MODEL)('%s: one model, no stack', step => {
    const inventory = inventoryAt(step);
    const models = userModels(inventory);
    expect(models.map(m => m.className)).toEqual(['YOLO']);
    expect(findStackedModels(inventory)).toEqual([]);
    const kinds = findings(facts(inventory)).map(f => f.kind);
    expect(kinds).not.toContain('named-older-model');
    expect(kinds).not.toContain('stale-model');
  });

  const owner = (step: string) =>
    findings(facts(inventoryAt(step))).filter(f => f.kind === 'owner-object');

  it.each(ONE_MODEL.filter(s => !s.startsWith('a name on')))(
    '%s: the trainer is an owner finding with Drop the finished trainer',
    step => {
      const found = owner(step);
      expect(found).toHaveLength(1);
      expect(found[0].subject).toBe('model.trainer');
      expect(found[0].fix).toEqual({
        kind: 'drop-trainer',
        modelId: found[0].id.replace('owner-object:', ''),
        name: 'model'
      });
      expect(found[0].explain(trans)).toMatch(
        /^model\.trainer \(finished\) holds a model copy \(11\.5 MiB\), an EMA copy \(11\.5 MiB\), AdamW state \(23\.0 MiB\): dropping it keeps model\.$/
      );
    }
  );

  it.each([
    ['a name on the EMA copy', 'ema'],
    ['a name on the trainer', 'trainer']
  ])('%s: no drop button while %s names a part', (step, name) => {
    const [found] = owner(step);
    expect(found.fix).toEqual({ kind: 'none' });
    expect(found.explain(trans)).toContain(
      `; ${name} also names part of it: delete ${name} first.`
    );
  });

  it("predicted: the drop frees the trainer's parts, not the predictor's copy", () => {
    const [found] = owner('predicted');
    const [model] = userModels(inventoryAt('predicted'));
    const trainer = (model.parts ?? []).filter(p =>
      p.path.startsWith('trainer.')
    );
    expect(trainer.map(p => p.path).sort()).toEqual([
      'trainer.ema.ema',
      'trainer.model',
      'trainer.optimizer'
    ]);
    expect(found.bytes).toEqual({
      cpu: trainer.reduce((sum, p) => sum + p.bytes.cpu, 0)
    });
    expect(found.evidence).not.toContainEqual(
      expect.stringContaining('backend')
    );
  });

  it.each([
    ['a loop over the layers', 'm'],
    ['a list of the layers', 'layers']
  ])(
    '%s, then a second YOLO: %s holds a layer, not the model; the toast names model only',
    (step, piece) => {
      const touched = inventoryAt(step);
      const other = inventoryAt('a second YOLO').models.find(
        m => m.holders[0].name === 'other'
      )!;
      const inventory = { ...touched, models: [...touched.models, other] };
      const [older] = userModels(inventory);
      expect(older.holders.find(h => h.name === piece)?.submodule).toBe(true);
      expect(older.stale).toBe(false);
      const [group] = findStackedModels(inventory);
      expect(group.older).toEqual([older]);
      expect(describeStacking(group, trans, 0, older)).toMatch(
        /^Stacked YOLO: model still holds YOLO \(yolov8n\.yaml\), /
      );
      const [named] = findings(facts(inventory)).filter(
        f => f.kind === 'named-older-model'
      );
      expect(named.subject).toBe('model');
      expect(named.fix).toMatchObject({ kind: 'delete', names: ['model'] });
    }
  );

  it('a second YOLO while the trained one is named: one stack of two', () => {
    const inventory = inventoryAt('a second YOLO');
    const [group] = findStackedModels(inventory);
    expect(findStackedModels(inventory)).toHaveLength(1);
    expect(group.older.map(m => m.holders.map(h => h.path))).toEqual([
      ['model']
    ]);
    expect(group.newest.holders.map(h => h.path)).toEqual(['other']);
    const named = findings(facts(inventory)).filter(
      f => f.kind === 'named-older-model'
    );
    expect(named.map(f => f.explain(trans))).toEqual([
      expect.stringMatching(/^model still holds YOLO \(yolov8n\.yaml\), /)
    ]);
  });
});
