/**
 * A hand-written trainer (a user variable holding a model, its EMA copy,
 * AdamW state and a cache tensor), then two models of one class in a list
 * and under two names: the inventories a real kernel sent
 * (`test/fixtures/inventory_hand_trainer.json`, kept current by
 * `test/agent/test_trained_model.py`).
 */
import { findings, userModels } from '../../../src/analysis/findings';
import { holderRows } from '../../../src/analysis/memory/holders';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import type { IInventory } from '../../../src/protocol';
import steps from '../../fixtures/inventory_hand_trainer.json';
import { c01Inventory } from '../fixtures';
import { facts, trans } from './helpers';

function inventoryAt(step: string): IInventory {
  const found = (steps as unknown as Array<Record<string, unknown>>).find(
    s => s.step === step
  );
  if (!found) {
    throw new Error(`no step ${step} in the fixture`);
  }
  const inventory: Record<string, unknown> = { ...found };
  delete inventory.step;
  return { ...c01Inventory(), ...inventory } as IInventory;
}

describe('a hand-written trainer (real inventories)', () => {
  const trainer = inventoryAt('a hand-written trainer');

  it('its EMA copy is a part of the trainer, not a second model: no stack', () => {
    expect(trainer.models).toHaveLength(2);
    expect(userModels(trainer).map(m => m.holders[0].path)).toEqual([
      'trainer.model'
    ]);
    expect(findStackedModels(trainer)).toEqual([]);
  });

  it('the panel has one row for it, the EMA copy a part row of the model', () => {
    const rows = holderRows(trainer);
    expect(rows.map(r => r.paths)).toEqual([['trainer.model']]);
    const ema = trainer.models.find(m => m.holders[0].path === 'trainer.ema')!;
    expect(rows[0].parts).toContainEqual({
      path: 'trainer.ema',
      kind: 'model',
      className: 'Sequential',
      bytes: 2101248, // two Linear(512, 512), fp32, no gradients
      perDevice: ema.bytes
    });
  });

  it('a module nothing reaches is no row (the unreachable finding covers it)', () => {
    const orphan = {
      ...trainer.models[0],
      id: 'orphan',
      holders: [
        { kind: 'hidden' as const, name: '<hidden>', path: '<hidden>' }
      ],
      stale: true
    };
    const withOrphan = { ...trainer, models: [...trainer.models, orphan] };
    expect(holderRows(withOrphan).map(r => r.model.id)).not.toContain('orphan');
    expect(findings(facts(withOrphan)).map(f => f.kind)).toContain(
      'unreachable'
    );
  });

  it('without the owners fact the EMA copy would stack as a second Sequential', () => {
    const older = { ...trainer, owners: [] };
    expect(findStackedModels(older)).toHaveLength(1);
  });

  it('one owner finding: what it holds with bytes, Delete trainer…', () => {
    const owner = findings(facts(trainer)).filter(
      f => f.kind === 'owner-object'
    );
    expect(owner).toHaveLength(1);
    expect(owner[0]).toMatchObject({
      id: 'owner-object:trainer',
      severity: 'info',
      subject: 'trainer',
      bytes: { cpu: trainer.roots[0].bytes.cpu },
      fix: {
        kind: 'delete',
        modelId: userModels(trainer)[0].id,
        names: ['trainer']
      }
    });
    expect(owner[0].explain(trans)).toBe(
      'trainer (Trainer) holds a model (4.0 MiB, of which 2.0 MiB gradients), an EMA copy (2.0 MiB), AdamW state (4.0 MiB), tensors (4.0 MiB): deleting trainer frees 14.0 MiB.'
    );
    expect(owner[0].evidence).toEqual([
      'trainer.model (Sequential): 4.0 MiB in RAM',
      'trainer.ema (Sequential): 2.0 MiB in RAM',
      'trainer.opt (AdamW): 4.0 MiB in RAM',
      'trainer.cache (Tensor): 4.0 MiB in RAM'
    ]);
  });

  it.each(['two nets of one class in a list', 'two named nets of one class'])(
    '%s: different user models of one class still stack',
    step => {
      const inventory = inventoryAt(step);
      const [group] = findStackedModels(inventory);
      expect(findStackedModels(inventory)).toHaveLength(1);
      // the trainer's model is one of them; its EMA copy is not
      expect([...group.older, group.newest]).toHaveLength(3);
      expect(
        [...group.older, group.newest].map(m => m.holders[0].path)
      ).not.toContain('trainer.ema');
    }
  );
});

describe('owner objects: who else names the model', () => {
  const trainer = inventoryAt('a hand-written trainer');
  const [model] = userModels(trainer);

  it('another variable naming the model: no Delete trainer…, no "frees"', () => {
    const named = {
      ...trainer,
      models: trainer.models.map(m =>
        m.id === model.id
          ? {
              ...m,
              holders: [
                ...m.holders,
                { kind: 'variable' as const, name: 'net', path: 'net' }
              ]
            }
          : m
      )
    };
    const [owner] = findings(facts(named)).filter(
      f => f.kind === 'owner-object'
    );
    expect(owner.fix).toEqual({ kind: 'none' });
    expect(owner.explain(trans)).toBe(
      'trainer (Trainer) holds a model (4.0 MiB, of which 2.0 MiB gradients), an EMA copy (2.0 MiB), AdamW state (4.0 MiB), tensors (4.0 MiB).'
    );
  });

  it('an owner holding only its model tells nothing; the model keeps its own owner finding', () => {
    const alone = {
      ...trainer,
      owners: trainer.owners!.map(o => ({ ...o, holds: o.holds.slice(0, 1) })),
      models: trainer.models.map(m =>
        m.id === model.id
          ? {
              ...m,
              parts: [
                {
                  path: 'opt',
                  kind: 'optimizer' as const,
                  className: 'SGD',
                  bytes: { cpu: 2 ** 20 }
                }
              ]
            }
          : m
      )
    };
    const owner = findings(facts(alone)).filter(f => f.kind === 'owner-object');
    expect(owner.map(f => f.id)).toEqual([`owner-object:${model.id}`]);
  });
});
