import { readFileSync, writeFileSync } from 'fs';
import { join } from 'path';
import {
  DROP_TRAINER_MARKER,
  generateDropTrainerCell,
  holdingLabels
} from '../../src/analysis/codegen/drop-trainer-cell';

const MiB = 2 ** 20;

const parts = [
  {
    path: 'trainer.model',
    kind: 'model' as const,
    className: 'DetectionModel',
    bytes: { 'cuda:0': 12.1 * MiB }
  },
  {
    path: 'trainer.ema.ema',
    kind: 'model' as const,
    className: 'DetectionModel',
    bytes: { 'cuda:0': 12.1 * MiB }
  },
  {
    path: 'trainer.optimizer',
    kind: 'optimizer' as const,
    className: 'AdamW',
    bytes: { 'cuda:0': 24.1 * MiB }
  }
];

describe('generateDropTrainerCell', () => {
  const code = generateDropTrainerCell({
    name: 'model',
    holds: holdingLabels(parts),
    bytes: 48.3 * MiB
  })!;
  const lines = code.trimEnd().split('\n');

  it('says what it frees and keeps, in at most 28 lines of 79-column comments', () => {
    expect(lines[0]).toBe(DROP_TRAINER_MARKER);
    expect(lines.slice(1, 5)).toEqual([
      '# Inserted by jupyterlab-gpu-hygiene: drops what train() left on',
      '# model.trainer, about 48.3 MiB:',
      '# model copy 12.1 MiB, EMA copy 12.1 MiB, AdamW state 24.1 MiB;',
      '# keeps model: predict, val and export still work. Safe to re-run.'
    ]);
    expect(lines.length).toBeLessThanOrEqual(28);
    for (const line of lines.filter(l => l.trimStart().startsWith('#'))) {
      expect(line.length).toBeLessThanOrEqual(79);
    }
  });

  it('sets <name>.trainer = None, collects, and leaves no name behind', () => {
    expect(code).toContain('def _gpu_hygiene_drop_trainer(name="model",');
    expect(code).toContain('        owner.trainer = None');
    expect(code).toContain('    gc.collect()');
    // the helper gives back a variable of yours of its name, or unbinds itself
    expect(lines).toContain(
      '    globals().pop(me) if was is ... else globals().update({me: was})  # yours'
    );
    expect(lines.slice(-1)).toEqual(['_gpu_hygiene_drop_trainer()']);
  });

  it('acts only while the name holds the object of the finding (issue 31)', () => {
    expect(code).toContain('(name="model", held=None,');
    const checked = generateDropTrainerCell({
      name: 'model',
      holds: [],
      bytes: 0,
      valueId: '0x7f3a12345678'
    })!;
    expect(checked).toContain('(name="model", held=0x7f3a12345678,');
    const check = checked.indexOf('id(ns[name]) != held');
    expect(check).toBeGreaterThan(0);
    expect(check).toBeLessThan(checked.indexOf('owner.trainer = None'));
    expect(checked).toContain(
      'return print(f"# {name} changed since the finding: kept")'
    );
    const odd = generateDropTrainerCell({
      name: 'model',
      holds: [],
      bytes: 0,
      valueId: '0x1); import os; ('
    })!;
    expect(odd).toContain('held=None');
    expect(odd).not.toContain('import os');
  });

  it('only identifiers reach code; kernel text in comments stays one bounded line', () => {
    expect(
      generateDropTrainerCell({ name: 'x"); import os', holds: [], bytes: 0 })
    ).toBeNull();
    const long = generateDropTrainerCell({
      name: 'model',
      holds: ['a\nb'.repeat(60)],
      bytes: 0
    })!;
    const comments = long.split('\n').filter(l => l.startsWith('#'));
    expect(comments.every(l => l.length <= 79)).toBe(true);
    expect(long.split('\n')).toHaveLength(code.split('\n').length);
  });

  it('is the committed cell that the real-kernel pytest runs (UPDATE_FIXTURES=1 rewrites it)', () => {
    const path = join(
      __dirname,
      '..',
      'fixtures',
      'drop_trainer_cell_model.py'
    );
    if (process.env.UPDATE_FIXTURES) {
      writeFileSync(path, code);
    }
    expect(code).toBe(readFileSync(path, 'utf8'));
  });

  it('labels parts in English for the comment', () => {
    expect(
      holdingLabels([
        ...parts,
        {
          path: 'trainer.tloss',
          kind: 'tensor',
          className: 'Tensor',
          bytes: { cpu: MiB }
        }
      ])
    ).toEqual([
      'model copy 12.1 MiB',
      'EMA copy 12.1 MiB',
      'AdamW state 24.1 MiB',
      'tensors 1.0 MiB'
    ]);
  });
});
