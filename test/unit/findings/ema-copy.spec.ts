/**
 * Issue 28, item 4: copies are not older instances. After a real Ultralytics
 * training, `model.trainer = None` while a loop variable (`m`) still names
 * the trainer's EMA (a `deepcopy` of the model, marked `copied` by the agent)
 * — the inventories a real kernel sent (`test/fixtures/inventory_ema_copy.json`,
 * kept current by `test/agent/test_holders.py`), read as if on cuda:0
 * (`onCuda`). The copy is named by its variable as a copy of `model`; no
 * stack, and no fix ever deletes or frees the live `model`.
 */
import { findings, fixLabel } from '../../../src/analysis/findings';
import { planClean } from '../../../src/analysis/codegen/clean-cell';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import type { IInventory } from '../../../src/protocol';
import emaSteps from '../../fixtures/inventory_ema_copy.json';
import { at, facts, onCuda, trans } from './helpers';

const all = (inventory: IInventory) => findings(facts(inventory));

/** Every name a finding's fix would act on (its variable, its holders). */
function fixTargets(fix: unknown): string[] {
  return JSON.stringify(fix ?? null).match(/"[A-Za-z_][\w.]*"/g) ?? [];
}

describe.each([['m holds the EMA after trainer = None'], ['collected']])(
  'an EMA copy kept by a loop variable (%s)',
  step => {
    const inventory = onCuda(at(emaSteps, step));

    it('is no stacked instance of model', () => {
      expect(findStackedModels(inventory)).toEqual([]);
    });

    it('is told as a copy of model, named by m, with Move to CPU… of m', () => {
      const copies = all(inventory).filter(f => f.kind === 'model-copy');
      expect(copies.map(f => [f.subject, f.severity, f.fix])).toEqual([
        ['m', 'info', { kind: 'tensors', name: 'm' }]
      ]);
      expect(copies[0].explain(trans)).toMatch(
        /^m holds a copy of model \(DetectionModel \(yolov8n\.yaml\)\), made without its constructor/
      );
      expect(fixLabel(copies[0].fix, trans)).toBe('Move to CPU…');
    });

    it('no finding names model as stale or offers to delete it', () => {
      for (const finding of all(inventory)) {
        expect(finding.subject).not.toMatch(/^model\b/);
        expect(fixTargets(finding.fix)).not.toContain('"model"');
      }
      const plan = planClean(inventory);
      expect(plan.keptNames).toEqual(expect.arrayContaining(['m', 'model']));
      expect(
        plan.staleModels.filter(m => !m.holders.every(h => h.kind === 'hidden'))
      ).toEqual([]);
    });
  }
);
