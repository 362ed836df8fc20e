/**
 * The clean cell's shape over every kind of plan the generator is given
 * (`clean-plans.ts`: the unit fixtures and the real kernels' inventories):
 * at most 25 lines, every line within 79 columns, and the compact
 * signature still names every output-cache entry, hidden copy and variable
 * the plan drops.
 */
import {
  generateCleanCell,
  MAX_CELL_LINES,
  type ICleanPlan
} from '../../src/analysis/codegen/clean-cell';
import { CLEAN_MARKER } from '../../src/protocol';
import { representativePlans } from './clean-plans';

const plans = representativePlans();
const kinds = [...new Set(plans.map(p => p.kind))];

/** The `def` line(s) of a cell, joined. */
function signatureOf(code: string): string {
  const lines = code.split('\n');
  const start = lines.findIndex(l => l.startsWith('def '));
  const end = lines.findIndex((l, i) => i >= start && l.endsWith('):'));
  return lines
    .slice(start, end + 1)
    .map(l => l.trim())
    .join(' ');
}

/** The items of `name=(...)` in a signature: numbers (ranges expanded) or strings. */
function param(signature: string, name: string): Array<number | string> {
  const start = signature.indexOf(`${name}=(`);
  if (start < 0) {
    return [];
  }
  let depth = 0;
  let end = start + name.length + 1;
  for (; end < signature.length; end++) {
    depth += signature[end] === '(' ? 1 : signature[end] === ')' ? -1 : 0;
    if (depth === 0) {
      break;
    }
  }
  const inside = signature.slice(start + name.length + 2, end);
  // a tuple: empty, or a comma after the first item (`(2,)`, `("a" "b",)`)
  expect([name, inside]).toEqual([
    name,
    inside === '' || /^(?:"[^"]*"\s*|[^,"])+,/.test(inside) ? inside : 'a tuple'
  ]);
  const items: Array<number | string> = [];
  const token = /\*range\((\d+), (\d+)\)|(\d+)|((?:"[^"]*"\s*)+)/g;
  for (const m of inside.matchAll(token)) {
    if (m[1] !== undefined) {
      for (let k = Number(m[1]); k < Number(m[2]); k++) {
        items.push(k);
      }
    } else if (m[3] !== undefined) {
      items.push(Number(m[3]));
    } else {
      // adjacent literals are one string in Python
      items.push([...m[4].matchAll(/"([^"]*)"/g)].map(s => s[1]).join(''));
    }
  }
  return items;
}

describe('the clean cell over every kind of plan', () => {
  it('covers the kinds of plan the issue lists', () => {
    expect(kinds).toEqual([
      'empty',
      'stale models (C01)',
      'last traceback',
      'output-cache tensors, hidden copies',
      'graph holders, trainer parts (C08)',
      'unreachable cycle',
      'workers',
      'after training (real kernel)',
      'owner objects (real kernel)',
      'at the bounds'
    ]);
    expect(plans.length).toBeGreaterThan(100);
  });

  it.each(kinds)('%s: at most 25 lines, every line within 79 columns', kind => {
    for (const { name, plan } of plans.filter(p => p.kind === kind)) {
      const lines = generateCleanCell(plan).replace(/\n$/, '').split('\n');
      const context = `${name}:\n${lines.join('\n')}`;
      expect([context, lines.length <= MAX_CELL_LINES]).toEqual([
        context,
        true
      ]);
      expect(MAX_CELL_LINES).toBe(25);
      const wide = lines.filter(l => l.length > 79);
      expect([name, wide]).toEqual([name, []]);
      expect(lines[0]).toBe(CLEAN_MARKER);
      // the helper gives back a variable of yours of its name (or unbinds itself)
      expect(lines[lines.length - 1]).toBe('_gpu_hygiene_clear_gpu()');
    }
  });

  it.each(kinds)('%s: the cell still drops everything the plan names', kind => {
    for (const { name, plan } of plans.filter(p => p.kind === kind)) {
      const code = generateCleanCell(plan);
      const signature = signatureOf(code);
      const expected = (p: ICleanPlan) => ({
        outKeys: p.outKeys,
        copies: p.copies,
        names: p.deleteNames,
        traceback: p.clearTraceback
      });
      expect([name, expected(plan)]).toEqual([
        name,
        {
          outKeys: param(signature, 'out_keys'),
          copies: param(signature, 'copies'),
          names: param(signature, 'names'),
          traceback: code.includes('traceback.clear_frames(')
        }
      ]);
      // the variables are deleted only when the user chose them
      expect(code.includes('{id(ns.pop(n, None)) for n')).toBe(
        plan.deleteNames.length > 0
      );
    }
  });
});
