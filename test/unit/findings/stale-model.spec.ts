import { staleModelRule } from '../../../src/analysis/findings/stale-model';
import { c01Inventory, held, yolo } from '../fixtures';
import { facts, inventoryOf, MiB, trans } from './helpers';

describe('stale-model', () => {
  it('C01: the older YOLO held only by Out[2], freed by its own plan; 12 MiB of RAM is an info', () => {
    const [finding] = staleModelRule(facts(c01Inventory()));
    expect(finding).toMatchObject({
      kind: 'stale-model',
      id: 'stale-model:0x7f0000000001',
      severity: 'info',
      subject: 'YOLO (yolov8n.yaml)',
      bytes: { cpu: 12_700_000 },
      evidence: ['Out[2]', '_2', '__'],
      fix: { kind: 'clean', plan: { modelId: '0x7f0000000001' } },
      stack: 'ultralytics'
    });
    expect(finding.explain(trans)).toBe(
      'No variable names YOLO (yolov8n.yaml) (12.1 MiB) any more; only Out[2], _2, __ keeps it alive. Clean GPU frees it.'
    );
  });

  it('bytes are the model and its parts, per device; no stack for a lone model', () => {
    const model = yolo({
      bytes: { 'cuda:0': 12 * MiB },
      parts: [
        {
          path: 'trainer.optimizer',
          kind: 'optimizer',
          className: 'SGD',
          bytes: { 'cuda:0': 6 * MiB, cpu: MiB }
        }
      ],
      holders: [
        held('traceback', 'last traceback (fit)', 'last traceback (fit).m')
      ],
      stale: true
    });
    const [finding] = staleModelRule(facts(inventoryOf([model])));
    expect(finding.bytes).toEqual({ 'cuda:0': 18 * MiB, cpu: MiB });
    expect(finding.evidence).toEqual(['last traceback (fit).m']);
    expect(finding.stack).toBeUndefined();
  });

  it('a named model, modules nothing reaches and no inventory give nothing', () => {
    expect(staleModelRule(facts(null))).toEqual([]);
    expect(staleModelRule(facts(inventoryOf([yolo()])))).toEqual([]);
    const hidden = yolo({
      holders: [held('hidden', 'unreachable from the namespace')],
      stale: true
    });
    expect(staleModelRule(facts(inventoryOf([hidden])))).toEqual([]);
  });
});
