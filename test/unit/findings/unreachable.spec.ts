import { findings } from '../../../src/analysis/findings';
import { holderUnknownRule } from '../../../src/analysis/findings/holder-unknown';
import { userModels } from '../../../src/analysis/findings/user-models';
import {
  classCounts,
  unreachableRule
} from '../../../src/analysis/findings/unreachable';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import { held, yolo } from '../fixtures';
import { cycleLayers, facts, inventoryOf, MiB, trans } from './helpers';

describe('unreachable', () => {
  it('the layers of a collected YOLO in a cycle are ONE finding, fixed by Clean GPU', () => {
    const inventory = inventoryOf([yolo(), ...cycleLayers()]);
    const list = unreachableRule(facts(inventory));
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      kind: 'unreachable',
      severity: 'info', // 8 MiB: under the one scale's 64 MiB
      subject: 'Conv ×2, C2f, Detect',
      bytes: { 'cuda:0': 8 * MiB },
      fix: { kind: 'clean', plan: {} }
    });
    expect(list[0].explain(trans)).toBe(
      'Unreachable, waiting for garbage collection (reference cycle), 8.0 MiB: 4 modules (Conv ×2, C2f +1). Clean GPU runs gc.collect() and frees them.'
    );
  });

  it('they are not models: no stack, not counted, no stale-model finding', () => {
    const inventory = inventoryOf([yolo(), ...cycleLayers()]);
    expect(findStackedModels(inventory)).toEqual([]);
    expect(userModels(inventory).map(m => m.className)).toEqual(['YOLO']);
    expect(findings(facts(inventory)).map(f => f.kind)).toEqual([
      'unreachable'
    ]);
  });

  it('is info on the CPU', () => {
    const [finding] = unreachableRule(facts(inventoryOf(cycleLayers(false))));
    expect(finding.severity).toBe('info');
  });

  it('after a cut walk: "not found", nothing offered, not unreachable', () => {
    const unknown = yolo({
      holders: [held('hidden', 'not found: the walk bound was hit')],
      stale: false
    });
    const inventory = { ...inventoryOf([unknown]), truncated: true };
    expect(unreachableRule(facts(inventory))).toEqual([]);
    const [finding] = holderUnknownRule(facts(inventory));
    expect(finding).toMatchObject({
      kind: 'holder-unknown',
      severity: 'info',
      evidence: ['not found: the walk bound was hit'],
      fix: { kind: 'none' }
    });
    expect(finding.explain(trans)).toContain('the walk bound was hit');
    expect(userModels(inventory)).toEqual([]);
  });

  it('classCounts', () => {
    expect(classCounts(['B', 'A', 'B'])).toBe('B ×2, A');
    expect(classCounts(['B', 'A', 'B', 'C'], 1)).toBe('B ×2 +2');
  });
});
