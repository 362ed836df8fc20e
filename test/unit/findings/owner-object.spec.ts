import {
  describeHoldings,
  finishedTrainerOwner
} from '../../../src/analysis/findings/model-parts';
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
  it('C08: a YOLO after train(), named by model: Drop the finished trainer, keep the model', () => {
    const [finding] = ownerObjectRule(facts(c08Inventory()));
    expect(finding).toMatchObject({
      kind: 'owner-object',
      severity: 'info',
      subject: 'model.trainer',
      bytes: { 'cuda:0': 18 * MiB },
      evidence: [
        'model.trainer.ema.ema (DetectionModel): 12.0 MiB on cuda:0',
        'model.trainer.optimizer (SGD): 6.0 MiB on cuda:0'
      ],
      fix: { kind: 'drop-trainer', modelId: '0x7f0000000010', name: 'model' }
    });
    expect(finding.explain(trans)).toBe(
      'model.trainer (finished) holds an EMA copy (12.0 MiB), SGD state (6.0 MiB): dropping it keeps model.'
    );
  });

  it('what it holds: a model copy, an EMA copy, optimizer state, tensors, with bytes', () => {
    expect(
      describeHoldings(
        [
          { ...parts[0], path: 'trainer.model' },
          ...parts,
          {
            path: 'trainer.tloss',
            kind: 'tensor',
            className: 'Tensor',
            bytes: { cpu: 2 * MiB }
          }
        ],
        trans
      )
    ).toBe(
      'a model copy (48.0 MiB), an EMA copy (48.0 MiB), SGD state (24.0 MiB), tensors (2.0 MiB)'
    );
  });

  it('a YOLO without a plain name, or not a YOLO wrapper, gets no drop-trainer fix', () => {
    const listed = yolo({
      parts,
      holders: [held('variable', 'runs', 'runs[0]')]
    });
    expect(finishedTrainerOwner(listed)).toBeNull();
    const detection = yolo({ className: 'DetectionModel', parts });
    expect(finishedTrainerOwner(detection)).toBeNull();
    const other = yolo({
      parts: [{ ...parts[1], path: 'optimizer' }]
    });
    expect(finishedTrainerOwner(other)).toBeNull();
    expect(finishedTrainerOwner(yolo({ parts }))).toBe('model');
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
      'trainer holds YOLO (yolov8n.yaml) together with an EMA copy (48.0 MiB), SGD state (24.0 MiB): deleting trainer frees them all, 120.0 MiB.'
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
      className: 'Net',
      family: 'torch',
      module: '__main__',
      label: 'Net',
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
