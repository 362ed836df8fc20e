/**
 * A Hugging Face `transformers.Trainer` and a Lightning `Trainer` after a
 * short training: the inventories a real kernel sent
 * (`test/fixtures/inventory_hf_trainer.json`,
 * `inventory_lightning_trainer.json`, kept current by
 * `test/agent/test_library_trainers.py`, which also runs the cells these
 * fixes insert and checks that they free the finding's bytes) through every
 * finding rule: one owner finding for the trainer, with what deleting it
 * frees, and no false alarm from the library wrapping the model
 * (`trainer.model_wrapped`, the accelerator's list, Lightning's strategy).
 */
import {
  findings,
  fixCommand,
  fixLabel,
  userModels
} from '../../../src/analysis/findings';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import type { IInventory } from '../../../src/protocol';
import { CommandIDs } from '../../../src/tokens';
import hfSteps from '../../fixtures/inventory_hf_trainer.json';
import plSteps from '../../fixtures/inventory_lightning_trainer.json';
import { at, facts, onCuda, type Step, trans } from './helpers';

const stepsOf = (steps: unknown) => (steps as Step[]).map(s => s.step);

const owners = (inventory: IInventory) =>
  findings(facts(inventory)).filter(f => f.kind === 'owner-object');

const rootBytes = (inventory: IInventory, name: string) =>
  inventory.roots.find(r => r.kind === 'variable' && r.name === name)!.sole;

describe.each([
  ['Hugging Face', hfSteps],
  ['Lightning', plSteps]
])('%s Trainer (real inventories)', (_library, steps) => {
  it.each(stepsOf(steps))(
    '%s: at most one model, no stack, no other finding',
    step => {
      const inventory = at(steps, step);
      expect(userModels(inventory).length).toBeLessThanOrEqual(1);
      expect(findStackedModels(inventory)).toEqual([]);
      const kinds = findings(facts(inventory)).map(f => f.kind);
      expect(kinds.filter(k => k !== 'owner-object')).toEqual([]);
      expect(kinds.length).toBeLessThanOrEqual(1);
    }
  );
});

describe('Hugging Face Trainer', () => {
  it('before training: the trainer and its data are named elsewhere, nothing to tell', () => {
    expect(owners(at(hfSteps, 'built'))).toEqual([]);
  });

  it.each(['trained', 'trained again'])(
    '%s, model kept: Delete trainer… of the variable frees its optimizer state, the model stays',
    step => {
      const inventory = at(hfSteps, step);
      const [finding] = owners(inventory);
      expect(owners(inventory)).toHaveLength(1);
      expect(finding).toMatchObject({
        id: 'owner-object:trainer',
        severity: 'info',
        subject: 'trainer',
        bytes: rootBytes(inventory, 'trainer'),
        fix: { kind: 'delete-variable', name: 'trainer' }
      });
      expect(finding.explain(trans)).toBe(
        'trainer (Trainer) holds a model (156.1 KiB), AcceleratedOptimizer state (296.4 KiB), tensors (1.1 KiB): deleting trainer frees 296.4 KiB; the model stays (model names it).'
      );
      expect(finding.evidence).toEqual([
        'trainer.model (BertForSequenceClassification): 156.1 KiB in RAM',
        'trainer.optimizer (AcceleratedOptimizer): 296.4 KiB in RAM',
        'trainer._tr_loss (Tensor): 4 B in RAM',
        'trainer.train_dataset (list): 1.1 KiB in RAM'
      ]);
      expect(fixLabel(finding.fix, trans)).toBe('Delete trainer…');
      expect(fixCommand(finding.fix, 'k1')).toEqual({
        id: CommandIDs.deleteVariable,
        args: { kernelId: 'k1', name: 'trainer' }
      });
    }
  );

  it('model deleted: Delete trainer… frees the model and its state, not the data that data names', () => {
    const inventory = at(hfSteps, 'model deleted');
    const [finding] = owners(inventory);
    const [model] = userModels(inventory);
    expect(finding).toMatchObject({
      bytes: rootBytes(inventory, 'trainer'),
      fix: { kind: 'delete', modelId: model.id, names: ['trainer'] }
    });
    expect(finding.explain(trans)).toBe(
      'trainer (Trainer) holds a model (156.1 KiB), AcceleratedOptimizer state (296.4 KiB), tensors (1.1 KiB): deleting trainer frees 452.6 KiB.'
    );
  });

  it.each(['trainer deleted, model kept', 'trainer deleted'])(
    'after the fix (%s): no owner finding',
    step => {
      expect(owners(at(hfSteps, step))).toEqual([]);
    }
  );
});

describe('Lightning Trainer', () => {
  it('before fit(): no owner', () => {
    expect(owners(at(plSteps, 'built'))).toEqual([]);
  });

  it.each(['trained', 'trainer named again'])(
    '%s: the module holds its trainer, so deleting trainer alone frees nothing: no button',
    step => {
      const inventory = at(plSteps, step);
      const [finding] = owners(inventory);
      expect(owners(inventory)).toHaveLength(1);
      expect(finding).toMatchObject({
        subject: 'trainer',
        severity: 'info',
        // deleting it frees nothing: the model (with gradients) and AdamW's
        // state are shown as shared (with the roots that share its storage:
        // module, and the data loader x and y feed), not as what it frees
        bytes: {},
        sharedBytes: { cpu: 34320 + 34336 },
        sharedWith: ['loader', 'module', 'x', 'y'],
        fix: { kind: 'none' }
      });
      expect(finding.explain(trans)).toBe(
        'trainer (Trainer) holds a model (33.5 KiB, of which 16.8 KiB gradients), AdamW state (33.5 KiB), but module reaches them too (through module._trainer): deleting trainer alone frees nothing.'
      );
      expect(finding.evidence).toEqual([
        'trainer._data_connector._datahook_selector.model (Classifier): 33.5 KiB in RAM',
        'trainer._accelerator_connector._strategy_flag._optimizers[0] (AdamW): 33.5 KiB in RAM'
      ]);
    }
  );

  it('on CUDA too, a trainer whose holdings all stay is never a warning (no toast)', () => {
    const inventory = onCuda(at(plSteps, 'trained'));
    const [finding] = owners(inventory);
    expect(finding.severity).toBe('info');
    expect(finding.bytes).toEqual({});
    expect(finding.sharedBytes).toEqual({ 'cuda:0': (34320 + 34336) * 1024 });
  });

  it('trainer deleted: the module still keeps the optimizer state through module._trainer', () => {
    const [finding] = owners(at(plSteps, 'trainer deleted'));
    expect(finding.subject).toBe('module._trainer');
    expect(finding.fix).toEqual({ kind: 'none' });
    expect(finding.explain(trans)).toBe(
      'module._trainer keeps AdamW state (33.5 KiB) next to Classifier: 33.5 KiB.'
    );
  });

  it('module deleted: Delete trainer… frees the model, its gradients and the optimizer state', () => {
    const inventory = at(plSteps, 'module deleted');
    const [finding] = owners(inventory);
    const [model] = userModels(inventory);
    expect(finding).toMatchObject({
      bytes: rootBytes(inventory, 'trainer'),
      fix: { kind: 'delete', modelId: model.id, names: ['trainer'] }
    });
    expect(finding.explain(trans)).toBe(
      'trainer (Trainer) holds a model (33.5 KiB, of which 16.8 KiB gradients), AdamW state (33.5 KiB): deleting trainer frees 67.0 KiB.'
    );
  });

  it('after the fix: nothing', () => {
    expect(owners(at(plSteps, 'trainer and module deleted'))).toEqual([]);
  });
});

describe('owner objects: what deleting the owner frees, from its root', () => {
  const trained = at(hfSteps, 'trained');

  it('another name keeps the model but the roots do not say they share it: no button', () => {
    const lone = {
      ...trained,
      roots: trained.roots.map(r =>
        r.name === 'trainer' ? { ...r, sharedWith: [] } : r
      )
    };
    const [finding] = owners(lone);
    expect(finding.fix).toEqual({ kind: 'none' });
    expect(finding.explain(trans)).toBe(
      'trainer (Trainer) holds a model (156.1 KiB), AcceleratedOptimizer state (296.4 KiB), tensors (1.1 KiB).'
    );
  });

  it('nothing is the owner’s alone and no model reaches it: the roots that do are named', () => {
    const none = {
      ...trained,
      roots: trained.roots.map(r =>
        r.name === 'trainer'
          ? { ...r, sole: {}, sharedWith: ['model', 'opt'] }
          : r
      )
    };
    const [finding] = owners(none);
    expect(finding.fix).toEqual({ kind: 'none' });
    expect(finding.explain(trans)).toBe(
      'trainer (Trainer) holds a model (156.1 KiB), AcceleratedOptimizer state (296.4 KiB), tensors (1.1 KiB), but model, opt reach them too: deleting trainer alone frees nothing.'
    );
  });

  it('the model also shown in Out[n]: the delete flow drops that entry too, so its bytes count', () => {
    const alone = at(hfSteps, 'model deleted');
    const shown = {
      ...alone,
      models: alone.models.map(m => ({
        ...m,
        holders: [
          ...m.holders,
          { kind: 'output' as const, name: 'Out[3]', path: 'Out[3]' }
        ]
      })),
      roots: alone.roots.map(r =>
        r.name === 'trainer'
          ? { ...r, sole: { cpu: 303540 + 4 }, sharedWith: ['data', 'Out[3]'] }
          : r
      )
    };
    const [finding] = owners(shown);
    expect(finding.fix.kind).toBe('delete');
    expect(finding.bytes).toEqual({ cpu: 303540 + 4 + 159880 });
  });

  it('without a root for the owner (an older agent, a cut list): all it holds', () => {
    const rootless = {
      ...at(hfSteps, 'model deleted'),
      roots: []
    };
    const [finding] = owners(rootless);
    expect(finding.bytes).toEqual({ cpu: 159880 + 303540 + 4 + 1088 });
    expect(finding.fix.kind).toBe('delete');
  });
});
