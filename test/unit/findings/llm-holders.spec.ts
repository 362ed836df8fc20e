/**
 * Issue 23, items 1 to 5: the holders of a plain PyTorch notebook that
 * no model shows, from the inventories a real kernel sent
 * (`test/fixtures/inventory_stranded_optimizer.json`,
 * `inventory_kept_errors.json`, `inventory_aliases.json`,
 * `inventory_pipeline.json`, `inventory_hook.json`, kept current by
 * `test/agent/test_llm_holders.py`, which also runs the cells these fixes
 * insert and checks what they free). The CPU inventories are read as if on
 * cuda:0 (`onCuda`: KiB become MiB), where the findings are warnings.
 */
import { findings, fixCommand, fixLabel } from '../../../src/analysis/findings';
import {
  generateCleanCell,
  planClean
} from '../../../src/analysis/codegen/clean-cell';
import { generateDeleteVariableCell } from '../../../src/analysis/codegen/tensor-cells';
import {
  generateDetachCell,
  removableHooks
} from '../../../src/analysis/memory/graph-holders';
import { findStackedModels } from '../../../src/analysis/memory/stacking';
import type { IInventory } from '../../../src/protocol';
import { CommandIDs } from '../../../src/tokens';
import aliasSteps from '../../fixtures/inventory_aliases.json';
import errorSteps from '../../fixtures/inventory_kept_errors.json';
import optimizerSteps from '../../fixtures/inventory_stranded_optimizer.json';
import pipelineSteps from '../../fixtures/inventory_pipeline.json';
import hookSteps from '../../fixtures/inventory_hook.json';
import namedParamSteps from '../../fixtures/inventory_named_params.json';
import { at, facts, MiB, onCuda, trans } from './helpers';

const all = (inventory: IInventory) => findings(facts(inventory));

describe('an optimizer whose model was deleted (real inventories)', () => {
  it('while the model lives: no finding about the optimizer', () => {
    const inventory = onCuda(at(optimizerSteps, 'optimizer of a live model'));
    // one info: its state, freed with opt and sched; no Move to CPU…
    const list = all(inventory);
    expect(list.map(f => [f.kind, f.severity, f.subject])).toEqual([
      ['optimizer', 'info', 'opt']
    ]);
    expect(list[0].explain(trans)).toBe(
      'opt (AdamW) keeps optimizer state: 4.0 GiB, freed by deleting opt once training is done (the parameters stay). sched keeps opt too: delete them together.'
    );
    expect(fixLabel(list[0].fix, trans)).toBe('Delete opt, sched…');
  });

  it('after del model: one warning naming the optimizer, its bytes and parts, Delete opt, sched…', () => {
    const inventory = onCuda(
      at(optimizerSteps, 'model deleted, optimizer kept')
    );
    const list = all(inventory);
    // the optimizer and its scheduler are told once, by their own rule
    expect(list.map(f => f.kind)).toEqual(['optimizer']);
    const [finding] = list;
    const params = 2 * (512 * 512 + 512) * 4 * 1024;
    expect(finding).toMatchObject({
      id: 'optimizer:opt',
      severity: 'warning',
      subject: 'opt',
      bytes: { 'cuda:0': 4 * params + 16 * 1024 },
      fix: { kind: 'delete-variable', name: 'opt', with: ['sched'] }
    });
    expect(finding.explain(trans)).toBe(
      'opt (AdamW) keeps the weights of a deleted model: 8.0 GiB (parameters 2.0 GiB, gradients 2.0 GiB, optimizer state 4.0 GiB). sched keeps opt too: delete them together.'
    );
    expect(finding.evidence).toEqual([
      'opt.param_groups',
      'opt.state',
      'sched'
    ]);
    expect(fixLabel(finding.fix, trans)).toBe('Delete opt, sched…');
    expect(fixCommand(finding.fix, 'k1')).toEqual({
      id: CommandIDs.deleteVariable,
      args: { kernelId: 'k1', name: 'opt', with: ['sched'] }
    });
  });

  it.each(['a loop over named parameters'])(
    'parameters a variable names (%s): no warning, no "deleted model"',
    step => {
      const list = all(onCuda(at(namedParamSteps, step)));
      expect(list.filter(f => f.severity === 'warning')).toEqual([]);
      const text = list.map(f => f.explain(trans)).join(' ');
      expect(text).not.toContain('deleted model');
      expect(list.map(f => f.kind)).toContain('optimizer');
    }
  );

  it('the delete cell deletes both names or neither', () => {
    const cell = generateDeleteVariableCell(
      'opt',
      { 'cuda:0': 8 * MiB },
      '0x7f01',
      [{ name: 'sched', valueId: '0x7f02' }]
    )!;
    expect(cell).toContain('deletes opt, sched (you confirmed)');
    expect(cell).toContain('which together keep 8.0 MiB on cuda:0');
    expect(cell).toContain('names=("opt", "sched"), held=(0x7f01, 0x7f02)');
    expect(cell).toContain('for name, held in zip(names, held):');
    expect(
      generateDeleteVariableCell('opt', {}, undefined, [{ name: 'a b' }])
    ).toBeNull();
  });
});

describe('a caught error kept in a variable (real inventories)', () => {
  it('err: one warning naming the variable, the frame and the local; Delete err…', () => {
    const inventory = onCuda(at(errorSteps, 'a caught error kept in err'));
    const list = all(inventory);
    expect(list.map(f => f.kind)).toEqual(['kept-error']);
    const [finding] = list;
    expect(finding).toMatchObject({
      id: 'kept-error:err',
      severity: 'warning',
      subject: 'err',
      bytes: { 'cuda:0': 9 * 1024 * MiB },
      evidence: ['err → step → acts'],
      fix: { kind: 'delete-variable', name: 'err' }
    });
    expect(finding.explain(trans)).toBe(
      'err keeps a caught RuntimeError whose traceback keeps the frames of the failed call and their tensors: 9.0 GiB (9.0 GiB through err → step → acts). Delete err, or let Clean GPU clear those frames.'
    );
    expect(fixLabel(finding.fix, trans)).toBe('Delete err…');
  });

  it('Clean GPU clears the frames of the error err names (identity-checked), keeping err', () => {
    // the fixture leaves the addresses out: the one the agent sent
    const recorded = at(errorSteps, 'a caught error kept in err');
    const inventory = {
      ...recorded,
      keptErrors: recorded.keptErrors!.map(e => ({ ...e, valueId: '0x7f01' }))
    };
    const plan = planClean(inventory);
    expect(plan.keptErrors).toEqual([{ name: 'err', valueId: '0x7f01' }]);
    // without the address (an agent that did not say what err held): not cleared
    expect(planClean(recorded).keptErrors).toEqual([]);
    const cell = generateCleanCell(plan);
    expect(cell.replace(/\n# /g, ' ')).toContain(
      'Clears the frames of the caught errors you keep (err).'
    );
    expect(cell).toContain('traceback.clear_frames(e.__traceback__)');
    // a plan for one model touches no error
    expect(planClean(inventory, { modelId: 'x' }).keptErrors).toEqual([]);
  });

  it('a retry loop that keeps its errors: one finding per error, Delete errors…', () => {
    const inventory = onCuda(at(errorSteps, 'a retry loop keeps its errors'));
    const list = all(inventory).filter(f => f.kind === 'kept-error');
    expect(list.map(f => [f.subject, f.evidence])).toEqual([
      ['errors[0]', ['errors[0] → step → acts']],
      ['errors[1]', ['errors[1] → step → acts']]
    ]);
    expect(list.map(f => fixLabel(f.fix, trans))).toEqual([
      'Delete errors…',
      'Delete errors…'
    ]);
    // Clean GPU does not clear errors in a list: the text does not offer it
    expect(list[0].explain(trans)).toMatch(/ Delete errors to free them\.$/);
    expect(list[0].explain(trans)).not.toContain('Clean GPU');
    expect(all(inventory).map(f => f.kind)).not.toContain('cuda-tensors');
    // errors in a list are not the plan's: Delete errors… frees them
    expect(planClean(inventory).keptErrors).toEqual([]);
  });
});

describe('aliases, a compiled wrapper and tied weights (real inventory)', () => {
  it('one model, no warning, no stack, nothing for Clean GPU to drop', () => {
    const inventory = onCuda(
      at(aliasSteps, 'aliases, a compiled wrapper, tied weights')
    );
    expect(all(inventory).filter(f => f.severity === 'warning')).toEqual([]);
    expect(findStackedModels(inventory)).toEqual([]);
    const plan = planClean(inventory);
    expect(plan.staleModels).toEqual([]);
    expect(plan.outKeys).toEqual([]);
    expect(plan.keptErrors).toEqual([]);
  });
});

describe('deliberate copies: an EMA and a best checkpoint (real inventory)', () => {
  it('each an info naming what it is a copy of, with Move to CPU…; no stack, no warning', () => {
    const inventory = onCuda(at(aliasSteps, 'two deliberate copies'));
    const list = all(inventory);
    expect(list.filter(f => f.severity === 'warning')).toEqual([]);
    expect(findStackedModels(inventory)).toEqual([]);
    const copies = list.filter(f => f.kind === 'model-copy');
    expect(copies.map(f => [f.subject, f.severity, f.fix])).toEqual([
      ['ema', 'info', { kind: 'tensors', name: 'ema' }],
      ['best', 'info', { kind: 'tensors', name: 'best' }]
    ]);
    expect(copies[0].explain(trans)).toBe(
      'ema holds a copy of model (LM), made without its constructor (copy.deepcopy or a whole-model torch.load): 8.0 GiB on cuda:0, kept as you made it. Move it to the CPU when it need not stay on the GPU.'
    );
    expect(fixLabel(copies[0].fix, trans)).toBe('Move to CPU…');
    // nothing else about them: not an older instance, not loose tensors
    expect(list.map(f => f.kind).sort()).toEqual(['model-copy', 'model-copy']);
  });

  it('Clean GPU keeps all three', () => {
    const plan = planClean(onCuda(at(aliasSteps, 'two deliberate copies')));
    expect(plan.staleModels).toEqual([]);
    expect(plan.keptNames).toEqual(
      expect.arrayContaining(['best', 'ema', 'model'])
    );
  });

  it('a copy nothing names any more is a stale model, dropped by Clean GPU', () => {
    const inventory = onCuda(at(aliasSteps, 'two deliberate copies'));
    const copy = inventory.models.find(m => m.copied)!;
    const dropped = {
      ...inventory,
      models: inventory.models.map(m =>
        m === copy
          ? {
              ...m,
              stale: true,
              holders: [
                { kind: 'output' as const, name: 'Out[5]', path: 'Out[5]' }
              ]
            }
          : m
      )
    };
    expect(all(dropped).map(f => f.kind)).toEqual([
      'stale-model',
      'model-copy'
    ]);
    expect(planClean(dropped).staleModels.map(m => m.id)).toEqual([copy.id]);
  });
});

describe('a pipeline built on a model that was rebound since (real inventory)', () => {
  it('names the wrapper path; the fix deletes pipe, never model', () => {
    const inventory = onCuda(
      at(pipelineSteps, 'the model rebound, the pipeline kept')
    );
    const list = all(inventory);
    expect(list.map(f => f.kind)).toEqual(['named-older-model']);
    const [finding] = list;
    const [old] = [...inventory.models].sort((a, b) => a.order - b.order);
    expect(finding.fix).toEqual({
      kind: 'delete',
      modelId: old.id,
      names: ['pipe']
    });
    expect(fixLabel(finding.fix, trans)).toBe('Delete pipe…');
    expect(finding.explain(trans)).toMatch(
      /^pipe\.model still holds BertForSequenceClassification, .+, while a newer BertForSequenceClassification is loaded: pipe still runs the old one\. Delete pipe, or build it again on the new model, to free it\.$/
    );
    expect(finding.evidence).toEqual(['pipe.model']);
  });
});

describe('a forward hook that appends outputs with their graphs (real inventory)', () => {
  it('the graph holder names the module of the hook; Fix… detaches and removes the hook', () => {
    const inventory = onCuda(at(hookSteps, 'a forward hook appends outputs'));
    const [finding] = all(inventory).filter(f => f.kind === 'graph-holder');
    expect(finding.explain(trans)).toBe(
      'feats keeps 4 autograd graphs alive (~8.0 GiB), appended by a forward hook on m[0]: run the model under torch.no_grad(), or store output.detach() in the hook. Fix… detaches them and removes the hook.'
    );
    expect(finding.fix).toEqual({ kind: 'detach', name: 'feats' });
    const [graph] = at(hookSteps, 'a forward hook appends outputs').graphs;
    const [hook] = removableHooks(graph);
    expect(hook).toMatchObject({
      module: 'm[0]',
      variable: 'm',
      modules: ['0']
    });
    expect(finding.evidence).toContain(`m[0]._forward_hooks[${hook.key}]`);
    const cell = generateDetachCell(graph)!;
    expect(cell).toContain(`hooks = (("m", ("0",), ${hook.key}),)`);
    expect(cell).toContain('getattr(mod, "_forward_hooks", {}).pop(key, None)');
    expect(cell.replace(/\n# /g, ' ')).toContain(
      'It removes the forward hook on m[0] that appends to it.'
    );
  });

  it('a hook path that is not plain names never reaches code', () => {
    const [graph] = at(hookSteps, 'a forward hook appends outputs').graphs;
    const odd = {
      ...graph,
      hooks: graph.hooks!.map(h => ({ ...h, modules: ['0"); import os; ("'] }))
    };
    expect(removableHooks(odd)).toEqual([]);
    expect(generateDetachCell(odd)).not.toContain('import os');
  });
});
