import { ownerObjectRule } from '../../../src/analysis/findings/owner-object';
import { c08Inventory, held, yolo } from '../fixtures';
import { facts, inventoryOf, MiB, trans } from './helpers';

const parts = [
  {
    path: 'trainer.ema.ema',
    kind: 'model' as const,
    className: 'DetectionModel',
    bytes: { 'cuda:0': 48 * MiB }
  },
  {
    path: 'trainer.optimizer',
    kind: 'optimizer' as const,
    className: 'SGD',
    bytes: { 'cuda:0': 24 * MiB }
  }
];

describe('owner-object', () => {
  it('C08: a YOLO with its trainer EMA and optimizer: evidence the parts, no button', () => {
    const [finding] = ownerObjectRule(facts(c08Inventory()));
    expect(finding).toMatchObject({
      kind: 'owner-object',
      severity: 'info',
      subject: 'runs[0].model.trainer',
      bytes: { 'cuda:0': 18 * MiB },
      evidence: [
        'trainer.ema.ema (DetectionModel): 12.0 MiB on cuda:0',
        'trainer.optimizer (SGD): 6.0 MiB on cuda:0'
      ],
      fix: { kind: 'none' }
    });
    expect(finding.explain(trans)).toBe(
      'runs[0].model.trainer keeps optimizer state or model copies next to YOLO (yolov8n.yaml): 18.0 MiB.'
    );
  });

  it('warning from 64 MiB of parts on one CUDA device', () => {
    const model = yolo({ bytes: { 'cuda:0': 48 * MiB }, parts });
    const [finding] = ownerObjectRule(facts(inventoryOf([model])));
    expect(finding.severity).toBe('warning');
    expect(finding.subject).toBe('model.trainer');
  });

  it('a variable holding the model through a path is the owner: Delete trainer…', () => {
    const model = yolo({
      bytes: { 'cuda:0': 48 * MiB },
      parts,
      holders: [held('variable', 'trainer', 'trainer.model')]
    });
    const [finding] = ownerObjectRule(facts(inventoryOf([model])));
    expect(finding.fix).toEqual({
      kind: 'delete',
      modelId: model.id,
      names: ['trainer']
    });
    expect(finding.bytes).toEqual({ 'cuda:0': 120 * MiB });
    expect(finding.explain(trans)).toBe(
      'trainer holds YOLO (yolov8n.yaml) together with optimizer state or model copies (72.0 MiB): deleting trainer frees them all, 120.0 MiB.'
    );
  });

  it('no owner button for a list holding the model', () => {
    const model = yolo({
      parts,
      holders: [held('variable', 'runs', 'runs[0].model')]
    });
    expect(ownerObjectRule(facts(inventoryOf([model])))[0].fix).toEqual({
      kind: 'none'
    });
  });

  it('no owner button when another variable also reaches the model; none for a stale model', () => {
    const both = yolo({
      parts,
      holders: [
        held('variable', 'trainer', 'trainer.model'),
        held('variable', 'model')
      ]
    });
    expect(ownerObjectRule(facts(inventoryOf([both])))[0].fix).toEqual({
      kind: 'none'
    });
    const stale = yolo({
      parts,
      holders: [held('output', 'Out[2]')],
      stale: true
    });
    expect(ownerObjectRule(facts(inventoryOf([stale])))).toEqual([]);
  });

  it('tensor parts alone are not an owner object', () => {
    const model = yolo({
      parts: [
        {
          path: 'cache',
          kind: 'tensor',
          className: 'Tensor',
          bytes: { 'cuda:0': 8 * MiB }
        }
      ]
    });
    expect(ownerObjectRule(facts(inventoryOf([model])))).toEqual([]);
  });
});
