import { elementsOf, textOf } from './dialog-text';
import { heldBy } from '../../src/analysis/memory/freed';
import { formatBytes } from '../../src/analysis/format';
import type { PerDevice } from '../../src/analysis/findings/types';
import type { IInventory } from '../../src/protocol';
import { Notification, showDialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { Signal } from '@lumino/signaling';
import {
  addCommands,
  namesToDelete,
  restartReturns,
  trainerOwner
} from '../../src/commands';
import { GpuKernelModel } from '../../src/model';
import { CLEAN_MARKER } from '../../src/protocol';
import {
  CommandIDs,
  DEFAULT_SETTINGS,
  IGpuMonitor,
  IGpuSettings
} from '../../src/tokens';
import { DETACH_MARKER } from '../../src/analysis/memory/graph-holders';
import { DROP_TRAINER_MARKER } from '../../src/analysis/codegen/drop-trainer-cell';
import {
  c01Inventory,
  c08Inventory,
  FakeServerKernels,
  gpuSample,
  graphHolder,
  h200Hello
} from './fixtures';
import { cellsOf, notebookOf, panelOf, quietYjs } from './notebooks';

jest.mock('@jupyterlab/apputils', () => ({
  ...jest.requireActual('@jupyterlab/apputils'),
  showDialog: jest.fn()
}));

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

/**
 * A real notebook model of four cells, the third active, in just enough of
 * a NotebookPanel for insertCleanCell (insert only, no run); `inserted`
 * records what the commands inserted.
 */
/** The execution count an inserted cell gets, as if it ran. */
const RAN_AS = 42;
/** Whether inserted cells get {@link RAN_AS} (false: as if the run never happened). */
let cellsRun = true;

function fakePanel() {
  const model = notebookOf(['a', 'b', 'c', 'd']);
  const panel = panelOf(model, 2);
  const inserted: Array<{ at: number; source: string; tags: string[] }> = [];
  const insert = model.sharedModel.insertCell.bind(model.sharedModel);
  model.sharedModel.insertCell = (at: number, cell: any) => {
    inserted.push({ at, source: cell.source, tags: cell.metadata.tags });
    const created = insert(at, cell);
    // no kernel here: the cell's run is played by setting its count
    (created as any).execution_count = cellsRun ? RAN_AS : null;
    return created;
  };
  return { panel, inserted, notebook: model };
}

beforeAll(() => quietYjs());
afterAll(() => jest.restoreAllMocks());

function setup(cleanAction: IGpuSettings['cleanAction'] = 'insert') {
  const model = new GpuKernelModel({ kernelId: 'k1' });
  model.apply(c01Inventory());
  const { panel, inserted, notebook } = fakePanel();
  const monitor: IGpuMonitor = {
    currentModel: model,
    currentChanged: new Signal<IGpuMonitor, GpuKernelModel | null>(
      {} as IGpuMonitor
    ),
    modelAdded: new Signal<IGpuMonitor, GpuKernelModel>({} as IGpuMonitor),
    models: [model],
    settings: { ...DEFAULT_SETTINGS, cleanAction },
    settingsChanged: new Signal<IGpuMonitor, IGpuSettings>({} as IGpuMonitor),
    setSetting: async () => undefined,
    panelFor: () => panel as any,
    currentSessionContext: null,
    askForFigures: () => undefined,
    serverKernels: new FakeServerKernels()
  };
  const commands = new CommandRegistry();
  addCommands({
    commands,
    monitor,
    sessionDialogs: null,
    translator: nullTranslator,
    trans
  });
  return { commands, inserted, model, notebook, panel };
}

describe('Clean GPU', () => {
  afterEach(() => Notification.dismiss());

  it('twice leaves one clean cell, the second one, where the first was', async () => {
    const { commands, inserted, model, notebook } = setup();
    await commands.execute(CommandIDs.clean, { kernelId: 'k1' });
    model.apply({ ...c01Inventory(), seq: 9, models: [] }); // what the first freed
    await commands.execute(CommandIDs.clean, { kernelId: 'k1' });
    expect(inserted.map(c => c.at)).toEqual([3, 3]);
    const cells = cellsOf(notebook);
    expect(cells.map(c => c.source.split('\n')[0])).toEqual([
      'a',
      'b',
      'c',
      CLEAN_MARKER,
      'd'
    ]);
    expect(cells[3].source).toBe(inserted[1].source);
    expect(inserted[0].source).not.toBe(inserted[1].source);
  });
});

describe('free and delete… commands (VRAM panel rows)', () => {
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    Notification.dismiss();
  });

  it('free inserts a clean cell for that stale model only', async () => {
    const { commands, inserted } = setup();
    const args = { kernelId: 'k1', modelId: '0x7f0000000001' };
    expect(commands.isEnabled(CommandIDs.freeModel, args)).toBe(true);
    expect(
      commands.isEnabled(CommandIDs.freeModel, {
        modelId: '0x7f0000000002'
      })
    ).toBe(false); // named: not stale
    await commands.execute(CommandIDs.freeModel, args);
    expect(inserted).toHaveLength(1);
    const { at, source, tags } = inserted[0];
    expect(at).toBe(3); // below the active cell
    expect(tags).toEqual(['gpu-hygiene-clean']);
    expect(source.split('\n')[0]).toBe(CLEAN_MARKER);
    expect(source).toContain('me="_gpu_hygiene_clear_gpu", out_keys=(2,)):');
    expect(source).not.toContain('del model');
    expect(showDialog).not.toHaveBeenCalled();
  });

  it('delete… asks first, then inserts del name and the clean tail', async () => {
    const { commands, inserted } = setup();
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: true },
      value: null
    });
    const args = { kernelId: 'k1', modelId: '0x7f0000000002' };
    expect(commands.isEnabled(CommandIDs.deleteModel, args)).toBe(true);
    expect(await commands.execute(CommandIDs.deleteModel, args)).toBe(true);
    expect(showDialog).toHaveBeenCalledTimes(1);
    const dialog = (showDialog as jest.Mock).mock.calls[0][0];
    expect(textOf(dialog.title)).toBe('Delete the variable model?');
    // the name in code font, and the cell it inserts shown before it runs
    expect(elementsOf(dialog.title, 'code')).toEqual(['model']);
    expect(textOf(dialog.body)).toContain('del model');
    const source = inserted[0].source;
    expect(elementsOf(dialog.body, 'pre')).toEqual([source]);
    expect(source).toContain(
      'me="_gpu_hygiene_clear_gpu", out_keys=(3,), names=("model",)):'
    );
    expect(source).toContain('gc.collect()');
    expect(source).toContain('sys.modules["torch"].cuda.empty_cache()');
  });

  it('delete… inserts nothing when the user cancels', async () => {
    const { commands, inserted } = setup();
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: false },
      value: null
    });
    expect(
      await commands.execute(CommandIDs.deleteModel, {
        modelId: '0x7f0000000002'
      })
    ).toBe(false);
    expect(inserted).toEqual([]);
  });

  it('delete… is never offered for a name that is not an identifier', async () => {
    const { commands, inserted, model } = setup();
    const inventory = c01Inventory();
    inventory.models[1].holders = [
      { kind: 'variable', name: 'x; import os', path: 'x; import os' }
    ];
    model.apply(inventory);
    const args = { modelId: '0x7f0000000002' };
    expect(commands.isEnabled(CommandIDs.deleteModel, args)).toBe(false);
    expect(await commands.execute(CommandIDs.deleteModel, args)).toBe(false);
    expect(showDialog).not.toHaveBeenCalled();
    expect(inserted).toEqual([]);
  });

  it('says so when the model is gone', async () => {
    const { commands, inserted } = setup();
    await commands.execute(CommandIDs.freeModel, { modelId: 'nope' });
    expect(inserted).toEqual([]);
    expect(
      Notification.manager.notifications.some(n =>
        n.message.includes('no longer alive')
      )
    ).toBe(true);
  });

  it('delete… is not offered for a model only reached through a container', async () => {
    const { commands, model } = setup();
    const inventory = c01Inventory();
    inventory.models[1].holders = [
      { kind: 'variable', name: 'runs', path: 'runs[0].model' }
    ];
    model.apply(inventory);
    expect(
      commands.isEnabled(CommandIDs.deleteModel, { modelId: '0x7f0000000002' })
    ).toBe(false);
  });
});

describe('fix a graph holder (VRAM panel, toast)', () => {
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    Notification.dismiss();
  });

  it('asks, then inserts a cell that detaches the tensors of that variable', async () => {
    const { commands, inserted, model } = setup();
    model.apply(c08Inventory());
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: true },
      value: null
    });
    const args = { kernelId: 'k1', name: 'val_losses' };
    expect(commands.isEnabled(CommandIDs.fixGraphHolder, args)).toBe(true);
    expect(await commands.execute(CommandIDs.fixGraphHolder, args)).toBe(true);
    const dialog = (showDialog as jest.Mock).mock.calls[0][0];
    expect(textOf(dialog.title)).toBe('Detach the tensors in val_losses?');
    expect(textOf(dialog.body)).toContain('tensor.detach()');
    // what the graphs keep is the inventory's figure, not a promise (issue 28)
    expect(textOf(dialog.body)).toMatch(
      /their autograd graphs keep \S+ \S+, freed unless something else holds them \(the toast after the cell says what was\)/
    );
    expect(textOf(dialog.body)).not.toMatch(/are freed|dropped \(/);
    expect(inserted).toHaveLength(1);
    expect(elementsOf(dialog.body, 'pre')).toEqual([inserted[0].source]);
    expect(inserted[0].tags).toEqual(['gpu-hygiene-detach-graphs']);
    expect(inserted[0].source.split('\n')[0]).toBe(DETACH_MARKER);
    expect(inserted[0].source).toContain(
      'def _gpu_hygiene_detach_graphs(name="val_losses",'
    );
    // Insert only (the setting): a toast says the cell still has to run.
    expect(Notification.manager.notifications.map(n => n.message)).toContain(
      'Run the inserted cell to detach the tensors in val_losses.'
    );
  });

  it.each([
    [
      'the graphs gone: the freed bytes measured by the next inventory',
      64 * 2 ** 20,
      0,
      'Detached the tensors in val_losses: what the holders keep went from 1.3 GiB to 350.0 MiB (the next inventory), 960.0 MiB freed.'
    ],
    [
      'nothing freed (another holder keeps the graphs): no "freed" claim',
      2 ** 30,
      0,
      'Detached the tensors in val_losses; no memory freed: another holder keeps it (the VRAM panel says which).'
    ],
    [
      'models nothing reaches went meanwhile (a collection): never counted as freed',
      2 ** 30,
      -(512 * 2 ** 20), // the hidden row, 512 MiB before, gone after
      'Detached the tensors in val_losses; no memory freed: another holder keeps it (the VRAM panel says which).'
    ],
    [
      'the variable drops but a displayed output now counts the graphs: no "freed" claim',
      64 * 2 ** 20,
      960 * 2 ** 20,
      'Detached the tensors in val_losses; no memory freed: another holder keeps it (the VRAM panel says which).'
    ]
  ])('inserted and run, %s', async (_case, left, takenOver, told) => {
    const { commands, model } = setup('insert-and-run');
    const first = c08Inventory();
    if (takenOver < 0) {
      first.roots.push({
        ...first.roots[0],
        kind: 'hidden',
        name: 'unreachable from the namespace',
        bytes: { 'cuda:0': -takenOver }
      });
    }
    model.apply(first);
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: true },
      value: null
    });
    expect(
      await commands.execute(CommandIDs.fixGraphHolder, {
        kernelId: 'k1',
        name: 'val_losses'
      })
    ).toBe(true);
    const after = c08Inventory();
    after.seq = 99;
    after.executionCount = RAN_AS; // the detach cell's own inventory
    after.graphs = [];
    after.roots[0] = { ...after.roots[0], bytes: { 'cuda:0': left } };
    if (takenOver > 0) {
      // the output cache's entry of a displayed mean: the graphs are its now
      after.roots.push({
        ...after.roots[0],
        kind: 'output',
        name: 'Out[9]',
        bytes: { 'cuda:0': takenOver }
      });
    }
    model.apply(after);
    await new Promise(resolve => setTimeout(resolve, 0));
    const messages = Notification.manager.notifications.map(n => n.message);
    expect(messages).toContain(told);
    expect(messages.some(m => m.includes('autograd graphs freed'))).toBe(false);
  });

  it('inserts nothing when the user cancels', async () => {
    const { commands, inserted, model } = setup();
    model.apply(c08Inventory());
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: false },
      value: null
    });
    expect(
      await commands.execute(CommandIDs.fixGraphHolder, { name: 'val_losses' })
    ).toBe(false);
    expect(inserted).toEqual([]);
  });

  it('is never offered for a path or a name that is not an identifier', async () => {
    const { commands, inserted, model } = setup();
    model.apply({
      ...c08Inventory(),
      graphs: [
        graphHolder({ name: 'stats', path: "stats['loss']" }),
        graphHolder({
          name: '<img src=x onerror=alert(1)>',
          path: '<img src=x onerror=alert(1)>'
        })
      ]
    });
    for (const name of ['stats', '<img src=x onerror=alert(1)>']) {
      expect(commands.isEnabled(CommandIDs.fixGraphHolder, { name })).toBe(
        false
      );
      expect(await commands.execute(CommandIDs.fixGraphHolder, { name })).toBe(
        false
      );
    }
    expect(showDialog).not.toHaveBeenCalled();
    expect(inserted).toEqual([]);
  });
});

describe('issue 17: delete an owner variable, restart says what it returns', () => {
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    Notification.dismiss();
  });

  it('namesToDelete keeps only variables that reach the model and are identifiers', () => {
    const model = c01Inventory().models[1];
    const owner = {
      ...model,
      holders: [
        { kind: 'variable' as const, name: 'trainer', path: 'trainer.model' },
        { kind: 'output' as const, name: 'Out[3]', path: 'Out[3]' }
      ]
    };
    expect(namesToDelete(owner, undefined)).toEqual([]);
    expect(namesToDelete(owner, ['trainer', 'Out[3]', 'other', 'del'])).toEqual(
      ['trainer']
    );
    expect(namesToDelete(model, undefined)).toEqual(['model']);
  });

  it('Delete trainer… deletes the owner variable named in the args', async () => {
    const { commands, inserted, model } = setup();
    const inventory = c01Inventory();
    inventory.models[1].holders = [
      { kind: 'variable', name: 'trainer', path: 'trainer.model' }
    ];
    model.apply({ ...inventory, seq: 9 });
    (showDialog as jest.Mock).mockResolvedValue({ button: { accept: true } });
    const args = {
      kernelId: 'k1',
      modelId: inventory.models[1].id,
      names: ['trainer']
    };
    expect(commands.isEnabled(CommandIDs.deleteModel, args)).toBe(true);
    expect(await commands.execute(CommandIDs.deleteModel, args)).toBe(true);
    expect(inserted[0].source).toContain('names=("trainer",)');
  });

  it('the restart caption says what restarting returns, in MiB, where known', () => {
    const { commands, model } = setup();
    // before the agent's hello: nothing known about a GPU, none promised
    expect(commands.caption(CommandIDs.restartKernel, {})).toBe(
      'Restart the kernel: frees all the memory of its process and loses all variables'
    );
    // a kernel that sees no GPU: no VRAM to free (issue 29)
    model.apply(h200Hello({ devices: [], nvml: false }));
    expect(commands.caption(CommandIDs.restartKernel, {})).toBe(
      'Restart the kernel: frees all the memory of its process (it sees no GPU) and loses all variables'
    );
    model.apply(h200Hello());
    expect(commands.caption(CommandIDs.restartKernel, {})).toBe(
      'Restart the kernel: frees all VRAM, including the CUDA context, and loses all variables'
    );
    model.apply(gpuSample(8000 * 2 ** 20, 80_000 * 2 ** 20));
    expect(restartReturns(model)).toEqual({
      process: 700 * 2 ** 20,
      nonTorch: 636 * 2 ** 20
    });
    expect(commands.caption(CommandIDs.restartKernel, {})).toBe(
      'Restart the kernel: frees all its VRAM (700.0 MiB, of which 636.0 MiB CUDA context and libraries that nothing else frees) and loses all variables'
    );
  });
  it('asks first, saying what a restart frees and loses; Cancel restarts nothing', async () => {
    const { commands, panel } = setup();
    const restart = jest.fn(async () => true);
    (panel as any).sessionContext = { restartKernel: restart };
    (panel as any).title = { label: 'train.ipynb' };
    (showDialog as jest.Mock).mockResolvedValueOnce({
      button: { accept: false }
    });
    expect(await commands.execute(CommandIDs.restartKernel, {})).toBe(false);
    const calls = (showDialog as jest.Mock).mock.calls;
    const dialog = calls[calls.length - 1][0];
    expect(textOf(dialog.title)).toBe('Restart the kernel of train.ipynb?');
    expect(textOf(dialog.body)).toBe(
      'Restart the kernel: frees all the memory of its process and loses all variables.'
    );
    // no cell: nothing to show
    expect(elementsOf(dialog.body, 'pre')).toEqual([]);
    expect(restart).not.toHaveBeenCalled();
    (showDialog as jest.Mock).mockResolvedValueOnce({
      button: { accept: true }
    });
    expect(await commands.execute(CommandIDs.restartKernel, {})).toBe(true);
    expect(restart).toHaveBeenCalledTimes(1);
  });
});

describe('Interrupt Kernel', () => {
  it('interrupts the kernel of the notebook that runs it; disabled without one', async () => {
    const { commands, panel } = setup();
    const args = { kernelId: 'k1' };
    expect(commands.label(CommandIDs.interruptKernel, args)).toBe(
      'Interrupt Kernel'
    );
    // the fake panel's session context has no kernel yet
    expect(commands.isEnabled(CommandIDs.interruptKernel, args)).toBe(false);
    expect(await commands.execute(CommandIDs.interruptKernel, args)).toBe(
      false
    );
    const interrupt = jest.fn(async () => undefined);
    (panel as any).sessionContext = { session: { kernel: { interrupt } } };
    expect(commands.isEnabled(CommandIDs.interruptKernel, args)).toBe(true);
    expect(await commands.execute(CommandIDs.interruptKernel, args)).toBe(true);
    expect(interrupt).toHaveBeenCalledTimes(1);
  });
});

describe('move a variable’s CUDA tensors to the CPU, or delete it (cuda-tensors)', () => {
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    Notification.dismiss();
  });

  const MiB = 2 ** 20;
  /** C01 plus `results` (24 MiB alone, 12 MiB shared with `last`). */
  function withResults() {
    const inventory = c01Inventory();
    inventory.roots.push({
      kind: 'variable',
      name: 'results',
      bytes: { 'cuda:0': 36 * MiB },
      sole: { 'cuda:0': 24 * MiB },
      shared: { 'cuda:0': 12 * MiB },
      sharedWith: ['last'],
      models: 0,
      tensors: 3
    });
    return inventory;
  }

  it('asks, then inserts the move-to-CPU cell', async () => {
    const { commands, inserted, model } = setup();
    model.apply(withResults());
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: true, actions: [] }
    });
    const args = { kernelId: 'k1', name: 'results' };
    expect(commands.isEnabled(CommandIDs.moveTensorsToCpu, args)).toBe(true);
    expect(await commands.execute(CommandIDs.moveTensorsToCpu, args)).toBe(
      true
    );
    const dialog = (showDialog as jest.Mock).mock.calls[0][0];
    expect(textOf(dialog.title)).toBe(
      'Move the CUDA tensors of results to the CPU?'
    );
    expect(textOf(dialog.body)).toContain(
      'results alone keeps 24.0 MiB of VRAM, freed unless something else holds it'
    );
    expect(textOf(dialog.body)).toContain('12.0 MiB more is shared with last');
    expect(elementsOf(dialog.body, 'code')).toContain('last');
    expect(dialog.buttons.map((b: any) => b.label)).toEqual([
      'Cancel',
      'Delete results',
      'Move to CPU'
    ]);
    expect(inserted).toHaveLength(1);
    expect(inserted[0].tags).toEqual(['gpu-hygiene-move-to-cpu']);
    expect(inserted[0].source).toContain(
      'def _gpu_hygiene_move_to_cpu(name="results",'
    );
    expect(elementsOf(dialog.body, 'pre')).toEqual([inserted[0].source]);
  });

  it('its Delete button inserts the delete cell instead (no second question)', async () => {
    const { commands, inserted, model } = setup();
    model.apply(withResults());
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: true, actions: ['delete'] }
    });
    await commands.execute(CommandIDs.moveTensorsToCpu, { name: 'results' });
    expect(showDialog).toHaveBeenCalledTimes(1);
    expect(inserted.map(c => c.tags)).toEqual([
      ['gpu-hygiene-delete-variable']
    ]);
    expect(inserted[0].source).toContain(
      'def _gpu_hygiene_delete_variable(name="results",'
    );
  });

  it('Delete Variable… asks; cancel inserts nothing', async () => {
    const { commands, inserted, model } = setup();
    model.apply(withResults());
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept: false, actions: [] }
    });
    expect(
      await commands.execute(CommandIDs.deleteVariable, { name: 'results' })
    ).toBe(false);
    expect(textOf((showDialog as jest.Mock).mock.calls[0][0].title)).toBe(
      'Delete the variable results?'
    );
    expect(inserted).toEqual([]);
  });

  it('is not offered for a name that is no variable root or not an identifier', async () => {
    const { commands, model } = setup();
    model.apply(withResults());
    for (const name of ['nothing', 'x; import os']) {
      expect(commands.isEnabled(CommandIDs.moveTensorsToCpu, { name })).toBe(
        false
      );
      expect(
        await commands.execute(CommandIDs.moveTensorsToCpu, { name })
      ).toBe(false);
    }
    expect(showDialog).not.toHaveBeenCalled();
  });
});

describe('issue 17: Drop the finished trainer, keep the model', () => {
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    Notification.dismiss();
  });

  function trained() {
    const { commands, inserted, model } = setup();
    const inventory = c08Inventory();
    model.apply({ ...inventory, seq: 9 });
    return { commands, inserted, id: inventory.models[0].id };
  }

  it('trainerOwner: the variable naming the YOLO itself, the requested one if it does', () => {
    const yolo = c08Inventory().models[0];
    expect(trainerOwner(yolo, undefined)).toBe('model');
    expect(trainerOwner(yolo, 'runs')).toBe('model'); // runs[0].model: not the YOLO itself
    expect(trainerOwner({ ...yolo, parts: [] }, 'model')).toBeNull();
  });

  it('asks with what it frees, then inserts the drop-trainer cell', async () => {
    const { commands, inserted, id } = trained();
    (showDialog as jest.Mock).mockResolvedValue({ button: { accept: true } });
    const args = { kernelId: 'k1', modelId: id, name: 'model' };
    expect(commands.isEnabled(CommandIDs.dropTrainer, args)).toBe(true);
    expect(commands.label(CommandIDs.dropTrainer, args)).toBe(
      'Drop Finished Trainer, Keep Model…'
    );
    expect(await commands.execute(CommandIDs.dropTrainer, args)).toBe(true);
    const dialog = (showDialog as jest.Mock).mock.calls[0][0];
    expect(textOf(dialog.title)).toBe('Drop the finished trainer of model?');
    expect(elementsOf(dialog.body, 'p')[0]).toBe(
      'A cell setting "model.trainer = None" is inserted below the active cell: the trainer keeps 18.0 MiB (an EMA copy (12.0 MiB), SGD state (6.0 MiB)), freed unless something else holds it, and model stays, still predicting, validating and exporting. The toast after the cell says what was freed. A new model.train() builds a new trainer.'
    );
    const { source, tags } = inserted[0];
    expect(tags).toEqual(['gpu-hygiene-drop-trainer']);
    expect(source.split('\n')[0]).toBe(DROP_TRAINER_MARKER);
    expect(source).toContain('# EMA copy 12.0 MiB, SGD state 6.0 MiB;');
    expect(source).toContain('def _gpu_hygiene_drop_trainer(name="model",');
    expect(elementsOf(dialog.body, 'pre')).toEqual([source]);
  });

  it('inserts nothing when the user cancels; not offered without a trainer', async () => {
    const { commands, inserted, id } = trained();
    (showDialog as jest.Mock).mockResolvedValue({ button: { accept: false } });
    expect(
      await commands.execute(CommandIDs.dropTrainer, { modelId: id })
    ).toBe(false);
    expect(inserted).toEqual([]);
    expect(
      commands.isEnabled(CommandIDs.dropTrainer, { modelId: '0x7f0000000002' })
    ).toBe(false);
  });
});

describe('every fix has a measured receipt (issue 28, item 1)', () => {
  const MiB = 2 ** 20;
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    Notification.dismiss();
  });

  /** C01 plus `results` on cuda:0 (36 MiB) and `last` (nothing alone). */
  function withResults(results: PerDevice = { 'cuda:0': 36 * MiB }) {
    const inventory = c01Inventory();
    inventory.roots.push({
      kind: 'variable',
      name: 'results',
      bytes: results,
      models: 0,
      tensors: 3
    });
    return inventory;
  }

  /** Run `id` with `args` in insert-and-run, deliver `after`, return the toasts. */
  async function receipt(
    before: IInventory,
    id: string,
    args: Record<string, unknown>,
    after: IInventory,
    answer: Record<string, unknown> = { accept: true, actions: [] },
    queued: IInventory[] = []
  ): Promise<string[]> {
    const { commands, model } = setup('insert-and-run');
    model.apply(before);
    (showDialog as jest.Mock).mockResolvedValue({ button: answer });
    expect(await commands.execute(id, { kernelId: 'k1', ...args })).toBe(true);
    // the inventories of cells that ran before the fix's, then its own
    queued.forEach((inventory, i) =>
      model.apply({ ...inventory, seq: 50 + i, executionCount: 40 + i })
    );
    model.apply({ ...after, seq: 99, executionCount: RAN_AS });
    await new Promise(resolve => setTimeout(resolve, 0));
    const messages = Notification.manager.notifications.map(n => n.message);
    // composed to fit a toast, never cut by JupyterLab
    messages.forEach(m => expect(m.length).toBeLessThanOrEqual(140));
    return messages;
  }

  const total = (inventory: IInventory) =>
    formatBytes(heldBy(inventory)!.named);

  it('Delete Variable…: the bytes the holders’ total dropped by', async () => {
    const before = withResults();
    const after = c01Inventory();
    expect(
      await receipt(
        before,
        CommandIDs.deleteVariable,
        { name: 'results' },
        after
      )
    ).toEqual([
      `Deleted results: what the holders keep went from ${total(before)} to ${total(after)} (the next inventory), 36.0 MiB freed.`
    ]);
  });

  it('Delete Variable…: a name the cell kept (it changed since the finding) is said to still hold', async () => {
    const before = withResults();
    expect(
      await receipt(
        before,
        CommandIDs.deleteVariable,
        { name: 'results' },
        withResults()
      )
    ).toEqual([
      'Deleted results, but results still holds 36.0 MiB on cuda:0 (the next inventory): the VRAM panel shows what is left.'
    ]);
  });

  it('Move to CPU…: counts VRAM only (the CPU copies are not what it frees)', async () => {
    const messages = await receipt(
      withResults(),
      CommandIDs.moveTensorsToCpu,
      { name: 'results' },
      withResults({ cpu: 36 * MiB })
    );
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(
      /^Moved the CUDA tensors of results to the CPU: what the holders keep went from .+ to .+ \(the next inventory\), 36\.0 MiB freed\.$/
    );
  });

  it('Move to CPU…: VRAM the variable still holds is said, never "freed"', async () => {
    const messages = await receipt(
      withResults(),
      CommandIDs.moveTensorsToCpu,
      { name: 'results' },
      withResults({ cpu: 24 * MiB, 'cuda:0': 12 * MiB })
    );
    expect(messages).toEqual([
      'Moved the CUDA tensors of results to the CPU, but results still holds 12.0 MiB of VRAM.'
    ]);
  });

  it('Drop trainer…: freed when the trainer’s parts went, else what it still holds', async () => {
    const before = c08Inventory();
    const id = before.models[0].id;
    const gone = c08Inventory();
    gone.models[0].parts = gone.models[0].parts.filter(
      p => !p.path.startsWith('trainer.')
    );
    gone.roots = gone.roots.map(r =>
      r.name === 'model' ? { ...r, bytes: { 'cuda:0': 12 * MiB } } : r
    );
    const args = { modelId: id, name: 'model' };
    expect(
      await receipt(before, CommandIDs.dropTrainer, args, gone, {
        accept: true
      })
    ).toEqual([
      `Dropped the finished trainer of model: what the holders keep went from ${total(before)} to ${total(gone)} (the next inventory), 18.0 MiB freed.`
    ]);
    Notification.dismiss();
    expect(
      await receipt(before, CommandIDs.dropTrainer, args, c08Inventory(), {
        accept: true
      })
    ).toEqual([
      'Dropped the finished trainer of model, but model.trainer still holds 18.0 MiB (the next inventory): the VRAM panel shows what is left.'
    ]);
  });

  it('a cell queued ahead of the fix is not counted as its effect', async () => {
    // cell [40] (before the fix) drops 1 GiB held by `big`; the fix frees 36 MiB
    const before = withResults();
    before.roots.push({
      kind: 'variable',
      name: 'big',
      bytes: { 'cuda:0': 1024 * MiB },
      models: 0,
      tensors: 1
    });
    const messages = await receipt(
      before,
      CommandIDs.deleteVariable,
      { name: 'results' },
      c01Inventory(),
      { accept: true, actions: [] },
      [withResults()]
    );
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(/, 36\.0 MiB freed\.$/);
  });

  it('a walk cut short: no figure claimed', async () => {
    const after = { ...c01Inventory(), truncated: true };
    expect(
      await receipt(
        withResults(),
        CommandIDs.deleteVariable,
        { name: 'results' },
        after
      )
    ).toEqual([
      'Deleted results; what it freed is not measured: the inventories before and after it are incomplete.'
    ]);
  });

  it('a cell that did not run (interrupted, queue stopped, kernel restarted) is said, with no receipt', async () => {
    cellsRun = false;
    try {
      const { commands, model } = setup('insert-and-run');
      model.apply(withResults());
      (showDialog as jest.Mock).mockResolvedValue({
        button: { accept: true, actions: [] }
      });
      await commands.execute(CommandIDs.deleteVariable, {
        kernelId: 'k1',
        name: 'results'
      });
      model.apply({ ...c01Inventory(), seq: 99, executionCount: 7 });
      await new Promise(resolve => setTimeout(resolve, 0));
      expect(Notification.manager.notifications.map(n => n.message)).toEqual([
        'The inserted cell did not run. Run the inserted cell to delete results.'
      ]);
    } finally {
      cellsRun = true;
    }
  });

  it.each([
    [
      'another holder took the bytes over',
      (after: IInventory) =>
        after.roots.push({
          kind: 'variable',
          name: 'last',
          bytes: { 'cuda:0': 36 * MiB },
          models: 0,
          tensors: 3
        })
    ],
    [
      'the bytes moved to no named holder (an lru_cache of a module keeps them)',
      (after: IInventory) => {
        after.unattributed = { 'cuda:0': 36 * MiB };
      }
    ]
  ])('nothing freed (%s): no "freed" claim', async (_case, change) => {
    const after = c01Inventory();
    change(after);
    expect(
      await receipt(
        withResults(),
        CommandIDs.deleteVariable,
        { name: 'results' },
        after
      )
    ).toEqual([
      'Deleted results; the next inventory shows no memory freed by it: another holder keeps what it let go (the VRAM panel says which).'
    ]);
  });
});
