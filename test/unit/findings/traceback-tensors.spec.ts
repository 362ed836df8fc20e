import {
  frameChain,
  tracebackTensorsRule
} from '../../../src/analysis/findings/traceback-tensors';
import { c08Inventory, held, yolo } from '../fixtures';
import type { IInventory } from '../../../src/protocol';
import { facts, inventoryOf, MiB, trans } from './helpers';

describe('traceback-tensors', () => {
  it('C08: the traceback keeps 256 MiB on cuda:0: a warning, Clean GPU', () => {
    const inventory: IInventory = {
      ...c08Inventory(),
      lastError: {
        type: 'ValueError',
        message: 'bad shape',
        frames: [
          { name: '<module>', bytes: {}, tensors: 0 },
          { name: 'train_step', bytes: { 'cuda:0': 256 * MiB }, tensors: 1 }
        ],
        bytes: { 'cuda:0': 256 * MiB }
      }
    };
    const [finding] = tracebackTensorsRule(facts(inventory));
    expect(finding).toMatchObject({
      kind: 'traceback-tensors',
      severity: 'warning',
      subject: 'last traceback (train_step)',
      bytes: { 'cuda:0': 256 * MiB },
      evidence: ['train_step: 256.0 MiB on cuda:0 (1)'],
      fix: { kind: 'clean', plan: {} }
    });
    expect(finding.explain(trans)).toBe(
      'The last exception (ValueError) keeps its frames and their tensors alive: 256.0 MiB. Clean GPU clears the last traceback.'
    );
  });

  it('a stale model only the traceback holds is not counted twice', () => {
    const model = yolo({
      bytes: { 'cuda:0': 12 * MiB },
      holders: [
        held('traceback', 'last traceback (f)', 'last traceback (f).m')
      ],
      stale: true
    });
    const only = {
      ...inventoryOf([model]),
      roots: [
        {
          kind: 'traceback' as const,
          name: 'last traceback (f)',
          bytes: { 'cuda:0': 12 * MiB },
          models: 1,
          tensors: 0
        }
      ]
    };
    expect(tracebackTensorsRule(facts(only))).toEqual([]);
    only.roots[0].bytes = { 'cuda:0': 20 * MiB };
    expect(tracebackTensorsRule(facts(only))[0].bytes).toEqual({
      'cuda:0': 8 * MiB
    });
  });

  it('names the frame chain once (a deep call chain named "last traceback" before each frame)', () => {
    const frames = [
      '<module>',
      'fit',
      'train_epoch',
      'step',
      'forward',
      'attn'
    ];
    const inventory = {
      ...inventoryOf([]),
      roots: frames.map(name => ({
        kind: 'traceback' as const,
        name: `last traceback (${name})`,
        bytes: { cpu: MiB },
        models: 0,
        tensors: 1
      }))
    };
    const [finding] = tracebackTensorsRule(facts(inventory));
    expect(finding.subject).toBe(
      'last traceback (<module> → fit → train_epoch → step → forward → attn)'
    );
    expect(finding.subject.match(/last traceback/g)).toHaveLength(1);
    // a root of another form: listed as it is
    expect(frameChain(['last traceback (f)', 'exception'])).toBe(
      'last traceback (f), exception'
    );
  });

  it('on the CPU it is info; without a traceback nothing', () => {
    const inventory = {
      ...inventoryOf([]),
      roots: [
        {
          kind: 'traceback' as const,
          name: 'last traceback (f)',
          bytes: { cpu: 4 * MiB },
          models: 0,
          tensors: 1
        }
      ]
    };
    expect(tracebackTensorsRule(facts(inventory))[0].severity).toBe('info');
    expect(tracebackTensorsRule(facts(inventoryOf([])))).toEqual([]);
  });
});
