/**
 * "Clean GPU frees it" only where the plan frees it (issue 46, item 6): the
 * stale-model finding, the clean cell's comment and the stacked-model
 * toast's Clean GPU promise it only where the model's own plan drops every
 * holder (`cleanLeaves`). The inventories are what real kernels sent
 * (`test/fixtures/inventory_clean_claims.json`, kept current by
 * `test/agent/test_clean_claims.py`, which runs each model's clean cell and
 * checks what it frees): a displayed model is promised; one held by the
 * user's own `_` / `__`, or by `Out['3']`, is not. A module's global is
 * not in those inventories (the agent does not report it beside the output
 * cache); where the agent reports one (`outside.holder`), no promise either.
 */
import { Notification } from '@jupyterlab/apputils';
import { CommandRegistry } from '@lumino/commands';
import {
  generateCleanCell,
  planClean
} from '../../../src/analysis/codegen/clean-cell';
import { findings, fixLabel } from '../../../src/analysis/findings';
import { staleModelRule } from '../../../src/analysis/findings/stale-model';
import { cleanLeaves } from '../../../src/analysis/memory/holders';
import { GpuKernelModel } from '../../../src/model';
import { GpuNotifier } from '../../../src/notifications';
import type { IInventory, IModelInfo } from '../../../src/protocol';
import claimSteps from '../../fixtures/inventory_clean_claims.json';
import { c01Inventory, held, OneModelMonitor, yolo } from '../fixtures';
import { at, facts, inventoryOf, onCuda, trans } from './helpers';

/** The clean cell's comment lines after the marker, as one text. */
function comments(code: string): string {
  return code
    .split('\n')
    .slice(1)
    .filter(l => l.startsWith('# '))
    .map(l => l.slice(2))
    .join(' ');
}

/** What is said of each stale model of a step: `frees`, or the holders it may leave. */
function claims(inventory: IInventory): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const model of inventory.models) {
    const left = cleanLeaves(model, inventory);
    out[model.holders.map(h => h.name).join(' ')] = left.length
      ? left
      : 'frees';
  }
  return out;
}

const FREES =
  /^No variable names Net \(.+\) any more; only .+ keeps it alive\. Clean GPU frees it\.$/;

describe('the real kernels’ stale models (inventory_clean_claims.json)', () => {
  it('a displayed model, and two: Clean GPU frees each', () => {
    for (const step of ['displayed', 'displayed, then another']) {
      const inventory = onCuda(at(claimSteps, step));
      expect(Object.values(claims(inventory))).toEqual(
        inventory.models.map(() => 'frees')
      );
      for (const finding of staleModelRule(facts(inventory))) {
        expect(finding.explain(trans)).toMatch(FREES);
        expect(finding.fix.kind).toBe('clean');
      }
    }
  });

  it.each([
    ['own _', '_'],
    ['own __', '__'],
    ['a string key in Out', "Out['3']"]
  ])(
    '%s: not promised; the finding names what Clean GPU leaves',
    (step, holder) => {
      const inventory = onCuda(at(claimSteps, step));
      const [model] = inventory.models;
      expect(cleanLeaves(model, inventory)).toEqual([holder]);
      const [finding] = staleModelRule(facts(inventory));
      expect(finding.explain(trans)).toBe(
        `No variable names Net (257.0 MiB) any more; ${holder} keeps it alive. Clean GPU may not free it: it leaves ${holder} alone, which may be a reference of yours, not IPython's own output cache. Delete that reference, or restart the kernel.`
      );
      expect(finding.explain(trans)).not.toContain('Clean GPU frees it');
      expect(finding.fix).toEqual({ kind: 'restart', bytes: finding.bytes });
      expect(fixLabel(finding.fix, trans)).not.toMatch(/Clean/);
      // the model's own cell says the same in its comment
      const cell = generateCleanCell(
        planClean(inventory, { modelId: model.id })
      );
      expect(comments(cell)).toContain(`May not free Net (${holder})`);
      expect(comments(cell)).not.toContain('Frees');
      // and the unrestricted Clean GPU does not list it as freed
      expect(comments(generateCleanCell(planClean(inventory)))).not.toMatch(
        /Frees Net/
      );
    }
  );

  it('_ rebound to an older output: neither model is promised (the slot names two)', () => {
    const inventory = onCuda(
      at(claimSteps, 'own _ rebound to an older output')
    );
    // `_` is the user's (the older model) beside IPython's (the newer): its
    // root names cells 2 and 3, so for either model `_` may be the other's
    expect(Object.values(claims(inventory))).toEqual([['_'], ['_']]);
    for (const finding of staleModelRule(facts(inventory))) {
      expect(finding.explain(trans)).toContain('Clean GPU may not free it');
    }
  });

  it('a user module beside the output cache: promised, the agent reports no holder (the gap)', () => {
    // test_clean_claims.py's xfail: the module keeps the model Clean GPU frees
    const inventory = onCuda(at(claimSteps, 'a user module'));
    expect(Object.values(claims(inventory))).toEqual(['frees']);
  });
});

describe('inventories shaped like the agent’s', () => {
  const stale = (holders: IModelInfo['holders'], extra = {}): IModelInfo =>
    yolo({
      bytes: { 'cuda:0': 512 * 2 ** 20 },
      holders,
      stale: true,
      ...extra
    });

  it('Out[N] with _N and the slots of the same cells: frees', () => {
    const model = stale([
      held('output', 'Out[4]'),
      held('output', '_4'),
      held('output', '___')
    ]);
    expect(cleanLeaves(model, inventoryOf([model]))).toEqual([]);
  });

  it('_N without its Out entry (del Out[4]): the model plan leaves it', () => {
    const model = stale([held('output', '_4'), held('output', '_')]);
    expect(cleanLeaves(model, inventoryOf([model]))).toEqual(['_4', '_']);
  });

  it('the last traceback and a loop variable over its layers: frees the model', () => {
    const model = stale([
      held('traceback', 'last traceback (fit)', 'last traceback (fit).m'),
      { ...held('variable', 'layer', 'layer'), submodule: true },
      held('output', 'Out[7]')
    ]);
    expect(cleanLeaves(model, inventoryOf([model]))).toEqual([]);
  });

  it('a holder outside the namespace the agent names (a module global): not promised', () => {
    const model = stale([held('output', 'Out[5]'), held('output', '_5')], {
      outside: { holder: 'module helpers: .MODEL', survived: false }
    });
    const inventory = inventoryOf([model]);
    expect(cleanLeaves(model, inventory)).toEqual(['module helpers: .MODEL']);
    const [finding] = staleModelRule(facts(inventory));
    expect(finding.explain(trans)).toContain(
      'it leaves module helpers: .MODEL alone'
    );
    expect(finding.evidence).toContain('module helpers: .MODEL');
  });

  it('Delete… frees a model whose only other holders it deletes', () => {
    const model = stale([held('variable', 'm'), held('output', 'Out[2]')], {
      stale: false
    });
    const inventory = inventoryOf([model]);
    expect(cleanLeaves(model, inventory, ['m'])).toEqual([]);
    expect(cleanLeaves(model, inventory)).toEqual(['m']);
    const cell = generateCleanCell(
      planClean(inventory, { modelId: model.id, deleteNames: ['m'] })
    );
    expect(comments(cell)).toContain('Frees YOLO (yolov8n.yaml)');
  });

  it('no Clean GPU toast button for an unfreeable stale model among findings', () => {
    const model = stale([held('output', '_')]);
    const list = findings(facts(inventoryOf([model])));
    const finding = list.find(f => f.kind === 'stale-model')!;
    expect(finding.fix.kind).toBe('restart');
  });
});

describe('the stacked-model toast', () => {
  afterEach(() => Notification.dismiss());

  /** The labels of the stacked toast's buttons when C01's older YOLO is held by `holders`. */
  function buttons(holders: IModelInfo['holders']): string[] {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model),
      commands: new CommandRegistry(),
      trans
    });
    const inventory = c01Inventory();
    inventory.models[0].holders = holders;
    model.apply(inventory);
    const toast = Notification.manager.notifications.find(n =>
      n.message.startsWith('Stacked YOLO')
    );
    notifier.dispose();
    return (toast?.options.actions ?? []).map(a => a.label);
  }

  it('offers Clean GPU only where it frees the older instance', () => {
    expect(buttons(c01Inventory().models[0].holders)).toEqual([
      'Clean GPU',
      'Restart kernel',
      "Don't warn again"
    ]);
    // the user's own `__ = YOLO(...)`: Clean GPU would free nothing
    expect(buttons([held('output', '__')])).toEqual([
      'Restart kernel',
      'Open VRAM panel',
      "Don't warn again"
    ]);
  });
});
