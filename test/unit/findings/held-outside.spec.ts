import { findings } from '../../../src/analysis/findings';
import { heldOutsideRule } from '../../../src/analysis/findings/held-outside';
import { unreachableRule } from '../../../src/analysis/findings/unreachable';
import { held, yolo } from '../fixtures';
import { cycleLayers, facts, inventoryOf, MiB, trans } from './helpers';

/** A model nothing in the namespace reaches, found held by a module global. */
function heldByModule(holder: string | null, survived = false) {
  return yolo({
    id: '0x7f0000000200',
    order: 20,
    label: 'YOLOv8n',
    bytes: { 'cuda:0': 12 * MiB },
    holders: [held('hidden', 'unreachable from the namespace')],
    stale: true,
    outside: { holder, survived }
  });
}

describe('held-outside (agent 0.12.0)', () => {
  it('names what holds it and never promises that gc.collect() frees it', () => {
    const inventory = inventoryOf([
      heldByModule('module helpers: ._MODEL'),
      ...cycleLayers()
    ]);
    const [finding] = heldOutsideRule(facts(inventory));
    expect(finding).toMatchObject({
      kind: 'held-outside',
      id: 'held-outside:0x7f0000000200',
      severity: 'info', // 12 MiB: under the one scale's 64 MiB
      subject: 'YOLOv8n',
      bytes: { 'cuda:0': 12 * MiB },
      fix: { kind: 'restart', bytes: { 'cuda:0': 12 * MiB } }
    });
    expect(finding.explain(trans)).toBe(
      "YOLOv8n (12.0 MiB) is held outside the notebook's variables, by module helpers: ._MODEL. Clean GPU cannot free it: drop that reference, or restart the kernel."
    );
    // the cycle's layers stay "waiting for garbage collection"; the held model is not among them
    const [unreachable] = unreachableRule(facts(inventory));
    expect(unreachable.evidence).not.toContain('YOLOv8n (0x7f0000000200)');
    expect(unreachable.bytes).toEqual({ 'cuda:0': 8 * MiB });
  });

  it('a survivor of gc.collect() whose holder was not found: said so, no Clean GPU', () => {
    const inventory = inventoryOf([heldByModule(null, true)]);
    const list = findings(facts(inventory));
    expect(list.map(f => f.kind)).toEqual(['held-outside']);
    expect(list[0].explain(trans)).toContain('survived gc.collect()');
    expect(list[0].evidence).toContain('survived gc.collect()');
    expect(list[0].fix.kind).toBe('restart');
  });
});
