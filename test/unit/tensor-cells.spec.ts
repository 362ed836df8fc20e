import {
  DELETE_MARKER,
  generateDeleteVariableCell,
  generateMoveToCpuCell,
  MOVE_MARKER
} from '../../src/analysis/codegen/tensor-cells';
import { fixCommand, fixLabel } from '../../src/analysis/findings';
import { CommandIDs } from '../../src/tokens';
import { trans } from './findings/helpers';

const MiB = 2 ** 20;

/** Code lines (comments dropped). */
const code = (cell: string) =>
  cell.split('\n').filter(l => !l.trimStart().startsWith('#'));

describe('generateMoveToCpuCell', () => {
  it('moves a tensor or the tensors of a list / dict / tuple, one level deep', () => {
    const cell = generateMoveToCpuCell('results', { 'cuda:0': 24 * MiB })!;
    const lines = cell.split('\n');
    expect(lines[0]).toBe(MOVE_MARKER);
    expect(lines[1]).toBe(
      '# Inserted by jupyterlab-gpu-hygiene: results keeps 24.0 MiB on cuda:0.'
    );
    expect(lines).toContain(
      'def _gpu_hygiene_move_to_cpu(name="results", held=None,'
    );
    expect(lines).toContain('        obj[:] = [cpu(v) for v in obj]');
    expect(lines).toContain('        ns[name] = tuple(cpu(v) for v in obj)');
    expect(lines).toContain('        torch.cuda.empty_cache()');
    const tail = cell.trimEnd().split('\n');
    expect(tail[tail.length - 1]).toBe('_gpu_hygiene_move_to_cpu()');
    for (const line of lines.filter(l => l.trimStart().startsWith('#'))) {
      expect(line.length).toBeLessThanOrEqual(79);
    }
  });

  it('puts only identifiers in code', () => {
    expect(generateMoveToCpuCell('x; import os')).toBeNull();
    expect(generateMoveToCpuCell('class')).toBeNull();
    expect(generateMoveToCpuCell('a.b')).toBeNull();
  });
});

describe('generateDeleteVariableCell', () => {
  it('pops the one name, then collects and empties the cache', () => {
    const cell = generateDeleteVariableCell('acts', { 'cuda:0': 8 * MiB })!;
    expect(cell.split('\n')[0]).toBe(DELETE_MARKER);
    expect(cell).toContain('# which alone keeps 8.0 MiB on cuda:0.');
    expect(code(cell)).toContain('    ns.pop(name, None)');
    expect(code(cell)).toContain(
      'def _gpu_hygiene_delete_variable(name="acts", held=None,'
    );
    expect(generateDeleteVariableCell('<img src=x>')).toBeNull();
  });
});

describe('the variable cells act on the object of the finding (issue 31)', () => {
  const id = '0x7f3a12345678';
  it.each([
    ['Move to CPU', generateMoveToCpuCell('acts', {}, id)!, 'obj = ns[name]'],
    [
      'Delete',
      generateDeleteVariableCell('acts', {}, id)!,
      'ns.pop(name, None)'
    ]
  ])(
    '%s: leaves the name alone when it holds another object',
    (_, cell, act) => {
      expect(cell).toContain(`(name="acts", held=${id},`);
      const lines = code(cell);
      const check = lines.indexOf(
        '    if held is not None and name in ns and id(ns[name]) != held:'
      );
      expect(check).toBeGreaterThan(0);
      expect(lines[check + 1]).toBe(
        '        return print(f"# {name} changed since the finding: kept")'
      );
      expect(lines.findIndex(l => l.includes(act))).toBeGreaterThan(check);
    }
  );

  it('only an address reaches code', () => {
    for (const bad of ['0x1); import os; (', '123', '0xZZ', '']) {
      const cell = generateDeleteVariableCell('acts', {}, bad)!;
      expect(cell).toContain('(name="acts", held=None,');
      expect(cell).not.toContain('import os');
    }
  });
});

describe('the tensors fix', () => {
  it('runs Move to CPU… with the variable name', () => {
    const fix = { kind: 'tensors' as const, name: 'results' };
    expect(fixCommand(fix, 'k1')).toEqual({
      id: CommandIDs.moveTensorsToCpu,
      args: { kernelId: 'k1', name: 'results' }
    });
    expect(fixLabel(fix, trans)).toBe('Move to CPU…');
  });
});
