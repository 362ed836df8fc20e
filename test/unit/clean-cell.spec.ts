import { readFileSync, writeFileSync } from 'fs';
import { join } from 'path';
import {
  commentSafe,
  generateCleanCell,
  isPythonIdentifier,
  planClean
} from '../../src/analysis/codegen/clean-cell';
import { CLEAN_MARKER } from '../../src/protocol';
import { c01Inventory, yolo } from './fixtures';

/**
 * The generated cells are kept as files in test/fixtures: jest checks the
 * generator still produces them byte for byte, and pytest (test/agent) runs
 * the very same files in a real IPython kernel with real Ultralytics models.
 * Regenerate with UPDATE_FIXTURES=1 after a deliberate change.
 */
function expectFixture(name: string, code: string): void {
  const path = join(__dirname, '..', 'fixtures', name);
  if (process.env.UPDATE_FIXTURES) {
    writeFileSync(path, code);
  }
  expect(code).toBe(readFileSync(path, 'utf8'));
}

/** The cell's comment lines after the marker, as one text. */
function comments(code: string): string {
  return code
    .split('\n')
    .slice(1)
    .filter(l => l.startsWith('# '))
    .map(l => l.slice(2))
    .join(' ');
}

describe('planClean', () => {
  it('drops the stale output-cache entries of C01 and keeps `model`', () => {
    const plan = planClean(c01Inventory());
    expect(plan.outKeys).toEqual([2]);
    expect(plan.keptNames).toEqual(['model']);
    expect(plan.staleModels.map(m => m.order)).toEqual([1]);
    expect(plan.staleBytes).toBe(12_700_000);
  });

  it('never drops the output of a model a variable still names', () => {
    const plan = planClean(c01Inventory());
    expect(plan.outKeys).not.toContain(3);
  });

  it('is empty without an inventory', () => {
    expect(planClean(null)).toEqual({
      outKeys: [],
      staleModels: [],
      keptNames: [],
      staleBytes: 0,
      modelId: null,
      deleteNames: [],
      deleteIds: {},
      clearTraceback: true,
      outputs: [],
      copies: [],
      keptErrors: []
    });
  });

  it('ignores holder names that are not identifiers or cache entries', () => {
    const inventory = {
      ...c01Inventory(),
      models: [
        yolo({
          stale: true,
          holders: [
            {
              kind: 'output',
              name: 'Out[2]; import os',
              path: 'Out[2]; import os'
            },
            { kind: 'output', name: '_2x', path: '_2x' }
          ]
        }),
        yolo({ holders: [{ kind: 'variable', name: 'a b', path: 'a b' }] })
      ]
    };
    const plan = planClean(inventory as any);
    expect(plan.outKeys).toEqual([]);
    expect(plan.keptNames).toEqual([]);
  });
});

describe('generateCleanCell', () => {
  it('generates the C01 clean cell (run by pytest in a real kernel)', () => {
    const code = generateCleanCell(planClean(c01Inventory()));
    expect(code.split('\n')[0]).toBe(CLEAN_MARKER);
    expect(code).toContain('me="_gpu_hygiene_clear_gpu", out_keys=(2,)):');
    expect(code).toContain('still named, so kept: model.');
    expectFixture('clean_cell_c01.py', code);
  });

  it('generates the cell with nothing stale (still clears the last traceback)', () => {
    const code = generateCleanCell(planClean(null));
    expect(code).toContain('out_keys=()');
    expect(code).toContain(
      'traceback.clear_frames(getattr(sys, "last_traceback", None))'
    );
    expectFixture('clean_cell_empty.py', code);
  });

  it('ends without a bare expression that the output cache would keep', () => {
    const lines = generateCleanCell(planClean(c01Inventory()))
      .trimEnd()
      .split('\n');
    expect(lines[lines.length - 1]).toBe('_gpu_hygiene_clear_gpu()');
    // the helper gives a variable of yours of its name back (or unbinds itself) first
    expect(lines).toContain(
      '    globals().pop(me) if was is ... else globals().update({me: was})  # yours'
    );
  });

  it('keeps hostile labels inside comment lines', () => {
    const inventory = c01Inventory();
    inventory.models[0].label =
      'Evil\nimport os; os.system("rm -rf /")\r\u2028x';
    const code = generateCleanCell(planClean(inventory));
    const lines = code.split('\n');
    expect(comments(code)).toContain('Evil import os; os.system("rm -rf /")');
    // the label's words only ever appear in comment lines
    expect(
      lines.filter(l => /Evil|os\.system|rm -rf/.test(l) && !l.startsWith('# '))
    ).toEqual([]);
    expect(lines.some(l => l.startsWith('import os'))).toBe(false);
  });

  it('commentSafe bounds the length', () => {
    expect(commentSafe('x'.repeat(500), 10)).toHaveLength(10);
  });
});

/** C01 plus a third model held by the last traceback and a named one. */
function mixedInventory() {
  const inventory = c01Inventory();
  inventory.models.push(
    yolo({
      id: '0x7f0000000003',
      order: 3,
      label: 'YOLO (yolov8s.yaml)',
      holders: [
        {
          kind: 'traceback',
          name: 'last traceback (train_step)',
          path: 'last traceback (train_step)'
        },
        { kind: 'output', name: 'Out[5]', path: 'Out[5]' }
      ],
      stale: true
    })
  );
  return inventory;
}

describe('planClean for one model (VRAM panel "free")', () => {
  it('drops only what holds that model', () => {
    const plan = planClean(mixedInventory(), { modelId: '0x7f0000000001' });
    expect(plan.outKeys).toEqual([2]);
    expect(plan.staleModels.map(m => m.id)).toEqual(['0x7f0000000001']);
    expect(plan.clearTraceback).toBe(false);
    expect(plan.keptNames).toEqual(['model']);
    const code = generateCleanCell(plan);
    expect(code.split('\n')[0]).toBe(CLEAN_MARKER);
    expect(code).toContain('me="_gpu_hygiene_clear_gpu", out_keys=(2,)):');
    expect(code).toContain('keeps one stale model alive');
    expect(code).not.toContain('last_traceback');
    expect(code).not.toContain('Out[5]');
    expect(code).toContain('gc.collect()');
    expect(code).toContain('sys.modules["torch"].cuda.empty_cache()');
    expectFixture('clean_cell_c01_free_one.py', code);
  });

  it('clears the traceback when it holds that model', () => {
    const plan = planClean(mixedInventory(), { modelId: '0x7f0000000003' });
    expect(plan.outKeys).toEqual([5]);
    expect(plan.clearTraceback).toBe(true);
    expect(generateCleanCell(plan)).toContain(
      'traceback.clear_frames(getattr(sys, "last_traceback", None))'
    );
  });

  it('plans nothing for a model that is named and not being deleted', () => {
    const plan = planClean(mixedInventory(), { modelId: '0x7f0000000002' });
    expect(plan.outKeys).toEqual([]);
    expect(plan.staleModels).toEqual([]);
  });
});

describe('planClean with deleteNames (VRAM panel "delete…")', () => {
  it('starts with del name and drops the output cache of that model', () => {
    const plan = planClean(c01Inventory(), {
      modelId: '0x7f0000000002',
      deleteNames: ['model']
    });
    expect(plan.deleteNames).toEqual(['model']);
    expect(plan.outKeys).toEqual([3]); // Out[3], _3 hold it too
    expect(plan.keptNames).toEqual([]);
    const code = generateCleanCell(plan);
    const lines = code.split('\n');
    expect(lines[0]).toBe(CLEAN_MARKER);
    expect(lines).toContain(
      '        me="_gpu_hygiene_clear_gpu", out_keys=(3,), names=("model",)):'
    );
    // A name that is already gone is fine: re-running the cell raises nothing.
    expect(lines).toContain(
      '    old |= {id(ns.pop(n, None)) for n in names}  # the variables you chose'
    );
    expect(lines.some(l => l.startsWith('del model'))).toBe(false);
    expect(code).toContain('gc.collect()');
    expectFixture('clean_cell_c01_delete_model.py', code);
  });

  it('deletes a name only while it holds what the finding was built on (valueId)', () => {
    const inventory = c01Inventory();
    const named = inventory.models[1];
    named.holders = named.holders.map(h =>
      h.kind === 'variable' ? { ...h, valueId: '0x7f00000000aa' } : h
    );
    const plan = planClean(inventory, {
      modelId: named.id,
      deleteNames: ['model']
    });
    expect(plan.deleteIds).toEqual({ model: '0x7f00000000aa' });
    const code = generateCleanCell(plan);
    const lines = code.split('\n');
    expect(lines).toContain(
      '        me="_gpu_hygiene_clear_gpu", out_keys=(3,), names=(("model",'
    );
    expect(lines).toContain('        0x7f00000000aa),)):');
    // a name that holds another object now is said and kept; the others go
    expect(lines).toContain(
      '    [print(f"# {n} changed: kept") for n, i in names if id(ns.get(n)) != i]'
    );
    expect(lines).toContain(
      '    old |= {id(ns.pop(n, None)) for n, i in names if id(ns.get(n)) == i}'
    );
    // foreign keys are never passed to str(): IPython's names are str keys only
    expect(lines.some(l => l.includes('str(n)'))).toBe(false);
    expectFixture('clean_cell_c01_delete_checked.py', code);
  });

  it('never trusts a valueId that is not a hex address', () => {
    const inventory = c01Inventory();
    inventory.models[1].holders = inventory.models[1].holders.map(h =>
      h.kind === 'variable' ? { ...h, valueId: '0x1); import os; (' } : h
    );
    const plan = planClean(inventory, {
      modelId: inventory.models[1].id,
      deleteNames: ['model']
    });
    expect(plan.deleteIds).toEqual({});
    expect(generateCleanCell(plan)).not.toContain('import os');
  });

  it('never puts a name that is not an identifier in code', () => {
    const inventory = c01Inventory();
    inventory.models[1].holders.push({
      kind: 'variable',
      name: 'x; import os',
      path: 'x; import os'
    });
    const plan = planClean(inventory, {
      modelId: '0x7f0000000002',
      deleteNames: ['x; import os', 'model', 'class', 'a\nb']
    });
    expect(plan.deleteNames).toEqual(['model']);
    const code = generateCleanCell(plan);
    // Kernel-supplied names only ever appear inside one-line comments.
    const codeLines = code
      .split('\n')
      .filter(l => !l.trimStart().startsWith('#'));
    expect(codeLines.some(l => l.includes('import os'))).toBe(false);
    expect(code.split('\n').filter(l => l.includes('names='))).toEqual([
      '        me="_gpu_hygiene_clear_gpu", out_keys=(3,), names=("model",)):'
    ]);
  });

  it('keeps an HTML-like class and variable name out of code (issue 5)', () => {
    const HOSTILE = '<img src=x onerror=alert(1)>';
    const inventory = c01Inventory();
    for (const model of inventory.models) {
      model.className = HOSTILE;
      model.label = HOSTILE;
      model.holders.push({ kind: 'variable', name: HOSTILE, path: HOSTILE });
    }
    for (const plan of [
      planClean(inventory),
      planClean(inventory, {
        modelId: inventory.models[1].id,
        deleteNames: [HOSTILE, 'model']
      })
    ]) {
      expect(plan.keptNames).not.toContain(HOSTILE);
      expect(plan.deleteNames).not.toContain(HOSTILE);
      const code = generateCleanCell(plan);
      const codeLines = code
        .split('\n')
        .filter(l => !l.trimStart().startsWith('#'));
      expect(codeLines.filter(l => l.includes('<img'))).toEqual([]);
    }
  });

  it('ignores deleteNames without a model id', () => {
    expect(planClean(c01Inventory(), { deleteNames: ['model'] })).toEqual(
      planClean(c01Inventory())
    );
  });

  it('isPythonIdentifier', () => {
    expect(isPythonIdentifier('model_2')).toBe(true);
    expect(isPythonIdentifier('_')).toBe(true);
    expect(isPythonIdentifier('2x')).toBe(false);
    expect(isPythonIdentifier('None')).toBe(false);
    expect(isPythonIdentifier('a.b')).toBe(false);
    expect(isPythonIdentifier('')).toBe(false);
  });
});

describe('output-cache entries holding CUDA tensors (issue 17, item 3)', () => {
  const MiB = 2 ** 20;
  /** C01 on CUDA plus displayed tensors: cell [4] (`Out[4]`) and `_` (a recent cell). */
  function withOutputs() {
    const inventory = c01Inventory();
    inventory.cudaInitialized = true;
    inventory.roots.push(
      {
        kind: 'output',
        name: '_4',
        bytes: { 'cuda:0': 64 * MiB },
        models: 0,
        tensors: 1
      },
      {
        kind: 'output',
        name: '_',
        bytes: { 'cuda:0': 32 * MiB },
        models: 0,
        tensors: 2
      },
      {
        kind: 'output',
        name: 'Out[5]',
        bytes: { cpu: 8 * MiB },
        models: 0,
        tensors: 1
      },
      {
        kind: 'variable',
        name: 'x',
        bytes: { 'cuda:0': 16 * MiB },
        models: 0,
        tensors: 1
      }
    );
    return inventory;
  }

  it('the unrestricted plan drops Out[N] and the slots that hold CUDA bytes, never a variable', () => {
    const plan = planClean(withOutputs());
    expect(plan.outKeys).toEqual([2, 4]);
    expect(plan.copies).toEqual(['_']);
    expect(plan.outputs.map(r => r.name)).toEqual(['_4', '_']);
    expect(plan.keptNames).toEqual(['model']);
    expect(plan.deleteNames).toEqual([]);
  });

  it('a plan for one model leaves the other outputs alone', () => {
    const plan = planClean(withOutputs(), { modelId: '0x7f0000000001' });
    expect(plan.outKeys).toEqual([2]);
    expect(plan.outputs).toEqual([]);
    expect(plan.copies).toEqual([]);
  });

  it('writes the bytes in the comments and drops what the slots show', () => {
    const code = generateCleanCell(planClean(withOutputs()));
    // three lines of description: the model, then the cache cell by cell
    expect(comments(code)).toContain(
      "Frees YOLO (yolov8n.yaml), 12.1 MiB (Out[2], _2, __); cell [4], a recent cell's _: 96.0 MiB on cuda:0, 3 tensors."
    );
    expect(code).toContain(
      'me="_gpu_hygiene_clear_gpu", out_keys=(2, 4), copies=("_",)):'
    );
    expect(code).not.toMatch(/\bx\b.*pop|del x/);
    for (const line of code.split('\n')) {
      expect(line.length).toBeLessThanOrEqual(79);
    }
    expectFixture('clean_cell_outputs.py', code);
  });

  it('CPU-only outputs change nothing: the C01 cell is byte for byte the same', () => {
    const code = generateCleanCell(planClean(c01Inventory()));
    expectFixture('clean_cell_c01.py', code);
  });
});
