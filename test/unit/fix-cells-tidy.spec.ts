/**
 * Issue 29, item 6: the generated fix cells are as tidy as the Clean GPU
 * cell — lines within 88 columns (comments within 79), no run of blank
 * lines, and real plurals instead of "graph(s)".
 */
import {
  generateDeleteVariableCell,
  generateMoveToCpuCell
} from '../../src/analysis/codegen/tensor-cells';
import { generateDropTrainerCell } from '../../src/analysis/codegen/drop-trainer-cell';
import { generateDropWorkersCell } from '../../src/analysis/codegen/drop-workers-cell';
import { generateDetachCell } from '../../src/analysis/memory/graph-holders';
import { graphHolder } from './fixtures';

const GiB = 2 ** 30;
/** A long, realistic variable name (27 characters). */
const NAME = 'validation_losses_per_epoch';
const ID = '0x7f3a12345678';

const cells: Array<[string, string]> = [
  ['move to CPU', generateMoveToCpuCell(NAME, { 'cuda:0': 3 * GiB }, ID)!],
  ['delete', generateDeleteVariableCell(NAME, { 'cuda:0': 3 * GiB }, ID)!],
  [
    'detach, one graph',
    generateDetachCell(
      graphHolder({ name: NAME, path: NAME, count: 1, valueId: ID })
    )!
  ],
  [
    'detach, many graphs',
    generateDetachCell(
      graphHolder({ name: NAME, path: NAME, count: 1200, truncated: true })
    )!
  ],
  [
    'drop trainer',
    generateDropTrainerCell({
      name: NAME,
      holds: ['model copy 12.1 MiB', 'EMA copy 12.1 MiB'],
      bytes: 24 * 2 ** 20,
      valueId: ID
    })!
  ],
  [
    'drop workers',
    generateDropWorkersCell([NAME, 'train_loader'], 8, { [NAME]: ID })!
  ]
];

describe.each(cells)('the %s cell', (_, cell) => {
  const lines = cell.trimEnd().split('\n');

  it('keeps code within 88 columns and comments within 79', () => {
    for (const line of lines) {
      const limit = line.trimStart().startsWith('#') ? 79 : 88;
      expect([line, line.length <= limit]).toEqual([line, true]);
    }
  });

  it('has no run of blank lines and ends with the call of its helper', () => {
    expect(cell).not.toMatch(/\n\s*\n\s*\n/);
    expect(lines[lines.length - 1]).toMatch(/^_gpu_hygiene_\w+\(\)$/);
  });

  it('writes real plurals', () => {
    expect(cell).not.toContain('(s)');
  });
});

it('a detach cell counts its graphs in words', () => {
  /** The cell's comment lines as one paragraph. */
  const prose = (cell: string) =>
    cell
      .split('\n')
      .filter(l => l.startsWith('# ') && !l.startsWith('# gpu-hygiene:'))
      .map(l => l.slice(2))
      .join(' ');
  expect(prose(cells[2][1])).toContain('keeps 1 autograd graph alive');
  expect(prose(cells[3][1])).toContain(
    'keeps 1200 autograd graphs alive (about 1.0 GiB or more)'
  );
});
