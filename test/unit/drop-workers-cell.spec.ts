import {
  DROP_WORKERS_MARKER,
  generateDropWorkersCell,
  workersToDrop
} from '../../src/analysis/codegen/drop-workers-cell';
import type { IInventory } from '../../src/protocol';
import { c01Inventory } from './fixtures';

function inventory(): IInventory {
  return {
    ...c01Inventory(),
    children: {
      visible: true,
      source: 'proc',
      reason: null,
      truncated: false,
      processes: [],
      holders: [
        {
          kind: 'variable',
          name: 'train_loader',
          path: 'train_loader',
          className: 'DataLoader',
          persistent: true,
          pids: [12, 11],
          valueId: '0x7f0000000011'
        },
        {
          kind: 'variable',
          name: 'runs',
          path: 'runs[0]',
          className: 'DataLoader',
          persistent: false,
          pids: [13]
        }
      ]
    }
  };
}

describe('generateDropWorkersCell', () => {
  it('shuts the workers down and deletes the names, comments within 79 columns', () => {
    const code = generateDropWorkersCell(['train_loader', 'it'], 4)!;
    expect(code).toBe(
      [
        DROP_WORKERS_MARKER,
        '# Inserted by jupyterlab-gpu-hygiene: train_loader, it keep 4 DataLoader worker',
        '# processes alive.',
        "# It shuts them down (the iterator's own _shutdown_workers(), as torch",
        '# does when an iterator is deleted) and deletes these names. Re-create',
        '# the loader to train again. Safe to re-run.',
        'def _gpu_hygiene_drop_workers(names=(',
        '        ("train_loader", None),',
        '        ("it", None)),',
        '        was=globals().get("_gpu_hygiene_drop_workers", ...),',
        '        me="_gpu_hygiene_drop_workers"):',
        '    globals().pop(me) if was is ... else globals().update({me: was})  # yours',
        '    import sys',
        '    from IPython import get_ipython',
        '    dl = sys.modules.get("torch.utils.data.dataloader")',
        '    ns = get_ipython().user_ns',
        '    for name, held in names:',
        '        if held is not None and name in ns and id(ns[name]) != held:',
        '            print(f"# {name} changed since the finding: kept")',
        '            continue',
        '        obj = ns.pop(name, None)',
        '        if dl is None or obj is None:',
        '            continue',
        '        its = [obj]',
        '        if isinstance(obj, dl.DataLoader):  # persistent_workers keeps one',
        '            its = list(vars(obj).values())',
        '        for it in its:',
        '            if isinstance(it, dl._MultiProcessingDataLoaderIter):',
        '                it._shutdown_workers()',
        '',
        '_gpu_hygiene_drop_workers()',
        ''
      ].join('\n')
    );
    for (const line of code.split('\n')) {
      expect(line.length).toBeLessThanOrEqual(79);
    }
    // 28, then one line a name and 3 for the identity check (issue 31): the
    // helper's head gives back a variable of yours of its name (3 lines)
    expect(code.split('\n').length).toBeLessThanOrEqual(28 + 2 + 3);
  });

  it('one name: a one-element tuple; only identifiers reach the code', () => {
    const code = generateDropWorkersCell(
      ['loader', 'x; import os', 'None'],
      1
    )!;
    expect(code).toContain('names=(\n        ("loader", None),)');
    expect(code).toContain(
      'loader keeps 1 DataLoader worker process\n# alive.'
    );
    expect(code).not.toContain('import os');
    expect(code).not.toContain('"None"');
    expect(generateDropWorkersCell(['a b'], 1)).toBeNull();
  });
});

describe('the drop-workers cell acts on the objects of the finding (issue 31)', () => {
  it('pairs each name with its holder id; a name without one acts by name', () => {
    const code = generateDropWorkersCell(['train_loader', 'it'], 4, {
      train_loader: '0x7f3a12345678',
      it: 'id(x)); import os; ('
    })!;
    expect(code).toContain('        ("train_loader", 0x7f3a12345678),');
    // only an address reaches code
    expect(code).toContain('        ("it", None)),');
    expect(code).not.toContain('import os');
  });
});

describe('workersToDrop', () => {
  it('keeps the requested names that are the loader themselves, with their workers', () => {
    expect(
      workersToDrop(inventory(), ['train_loader', 'runs', 'other'])
    ).toEqual({
      names: ['train_loader'],
      valueIds: { train_loader: '0x7f0000000011' },
      pids: [11, 12]
    });
    expect(workersToDrop(inventory(), 'train_loader')).toEqual({
      names: [],
      valueIds: {},
      pids: []
    });
    expect(workersToDrop(null, ['train_loader'])).toEqual({
      names: [],
      valueIds: {},
      pids: []
    });
  });
});
