/**
 * `generateCleanCell` re-checks every identifier and key of the plan it is
 * given (issue 46, item 5), not only of plans built by `planClean`: a plan
 * made by hand with a payload in a name, an id or an execution count is
 * refused with an error that names the field, and no code comes out. Every
 * plan `planClean` builds (`clean-plans.ts`: the unit fixtures and the real
 * kernels' inventories) still passes.
 */
import {
  checkCleanPlan,
  generateCleanCell,
  planClean,
  type ICleanPlan
} from '../../src/analysis/codegen/clean-cell';
import type { IRootBytes } from '../../src/protocol';
import { representativePlans } from './clean-plans';
import { c01Inventory, held } from './fixtures';

const PAYLOAD = '__import__("os").system("touch /tmp/pwned")';

/** A valid plan: C01's "delete…" of `model`, identity-checked. */
function basePlan(): ICleanPlan {
  const inventory = c01Inventory();
  inventory.models[1].holders[0].valueId = '0x7f00000000aa';
  return {
    ...planClean(inventory, {
      modelId: inventory.models[1].id,
      deleteNames: ['model']
    }),
    copies: ['_', '_7'],
    keptErrors: [{ name: 'err', valueId: '0x7f00000000bb' }]
  };
}

/** `basePlan` with `change` applied (a hand-made plan). */
function handMade(change: (plan: Record<string, unknown>) => void): ICleanPlan {
  const plan = basePlan() as unknown as Record<string, unknown>;
  change(plan);
  return plan as unknown as ICleanPlan;
}

const HOSTILE: Array<[string, (plan: Record<string, unknown>) => void]> = [
  ['outKeys', p => (p.outKeys = [`1); ${PAYLOAD}; (`])],
  ['outKeys', p => (p.outKeys = [-1])],
  ['outKeys', p => (p.outKeys = [1.5])],
  ['outKeys', p => (p.outKeys = [Number.NaN])],
  ['outKeys', p => (p.outKeys = [2 ** 60])],
  ['outKeys', p => (p.outKeys = `1); ${PAYLOAD}; (`)],
  ['copies', p => (p.copies = [`_"); ${PAYLOAD}; ("`])],
  ['copies', p => (p.copies = ['_1\n'])],
  ['deleteNames', p => (p.deleteNames = [`x"); ${PAYLOAD}; ("`])],
  ['deleteNames', p => (p.deleteNames = ['class'])],
  ['deleteNames', p => (p.deleteNames = ['a\nb'])],
  ['deleteNames', p => (p.deleteNames = [42])],
  ['deleteIds', p => (p.deleteIds = { model: `0x1); ${PAYLOAD}; (` })],
  ['deleteIds', p => (p.deleteIds = { other: '1' })],
  ['keptNames', p => (p.keptNames = ['x\nimport os'])],
  [
    'keptErrors',
    p => (p.keptErrors = [{ name: `e; ${PAYLOAD}`, valueId: '0x1' }])
  ],
  [
    'keptErrors',
    p => (p.keptErrors = [{ name: 'e', valueId: `0x1); ${PAYLOAD}; (` }])
  ],
  ['keptErrors', p => (p.keptErrors = [null])],
  [
    'outputs',
    p =>
      (p.outputs = [
        {
          kind: 'output',
          name: 'Out[3]',
          bytes: { 'cuda:0': 1 },
          cells: [`3\n${PAYLOAD}`],
          models: 0,
          tensors: 1
        } as unknown as IRootBytes
      ])
  ]
];

describe('generateCleanCell refuses a hand-made plan with a payload', () => {
  it.each(HOSTILE.map(([field, change], i) => [field, i, change] as const))(
    '%s (case %i)',
    (field, _i, change) => {
      const plan = handMade(change);
      expect(() => checkCleanPlan(plan)).toThrow(
        new RegExp(`^generateCleanCell: refused plan: ${field}\\b`)
      );
      expect(() => generateCleanCell(plan)).toThrow(/refused plan/);
    }
  );

  it('says which field and value, cut short', () => {
    const plan = handMade(
      p => (p.deleteNames = ['model', `${'x'.repeat(500)}-`])
    );
    let message = '';
    try {
      generateCleanCell(plan);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(
      /^generateCleanCell: refused plan: deleteNames\[1\] "x+… is not a Python identifier$/
    );
    expect(message.length).toBeLessThan(140);
  });

  it('quotes the payload it refused', () => {
    // unchecked, the numbers of `out_keys` were written into code with String()
    const plan = handMade(p => (p.outKeys = [`1); ${PAYLOAD}; (`]));
    expect(() => generateCleanCell(plan)).toThrow(
      'generateCleanCell: refused plan: outKeys[0] "1); __import__(\\"os\\").system(\\"touch /tmp/pwned\\"); (" is not an execution count'
    );
  });
});

describe('generateCleanCell takes every plan planClean builds', () => {
  it('the base plan and every representative plan', () => {
    expect(() => generateCleanCell(basePlan())).not.toThrow();
    const plans = representativePlans();
    expect(plans.length).toBeGreaterThan(20);
    for (const { name, plan } of plans) {
      expect(() => checkCleanPlan(plan)).not.toThrow(name);
    }
  });

  it('a kernel name that is no identifier stays out of the plan, not refused', () => {
    const inventory = c01Inventory();
    inventory.models[1].holders.push({
      ...held('variable', `x; ${PAYLOAD}`),
      valueId: '0x7f00000000cc'
    });
    const plan = planClean(inventory, {
      modelId: inventory.models[1].id,
      deleteNames: ['model', `x; ${PAYLOAD}`]
    });
    expect(plan.deleteNames).toEqual(['model']);
    const code = generateCleanCell(plan);
    const codeLines = code.split('\n').filter(l => !l.trim().startsWith('#'));
    expect(codeLines.some(l => l.includes('system'))).toBe(false);
  });

  it("a variable named like an Object method gets no id from Object's prototype", () => {
    const inventory = c01Inventory();
    inventory.models[1].holders = [held('variable', 'constructor')];
    const code = generateCleanCell(
      planClean(inventory, {
        modelId: inventory.models[1].id,
        deleteNames: ['constructor']
      })
    );
    expect(code).toContain('names=("constructor",)');
    expect(code).not.toContain('native code');
  });
});
