import { showDialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { addCommands } from '../../../src/commands';
import { GpuKernelModel } from '../../../src/model';
import { ToastActions } from '../../../src/notifications/actions';
import { CommandIDs } from '../../../src/tokens';
import { oomMessage, OneModelMonitor } from '../fixtures';

jest.mock('@jupyterlab/apputils', () => ({
  ...jest.requireActual('@jupyterlab/apputils'),
  showDialog: jest.fn()
}));

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const click = new MouseEvent('click');

/** The real commands (as the commands plugin adds them) and the panel's open command. */
function setup() {
  const model = new GpuKernelModel({ kernelId: 'k1' });
  const monitor = new OneModelMonitor(model);
  const commands = new CommandRegistry();
  addCommands({
    commands,
    monitor,
    sessionDialogs: null,
    translator: nullTranslator,
    trans
  });
  commands.addCommand(CommandIDs.openPanel, {
    label: 'VRAM Panel',
    caption: 'Show the current kernel’s VRAM over time',
    execute: () => undefined
  });
  const execute = jest
    .spyOn(commands, 'execute')
    .mockImplementation(async () => undefined);
  const actions = new ToastActions({ commands, monitor, trans });
  return { model, monitor, commands, execute, actions };
}

describe('ToastActions', () => {
  it('Clean GPU: the command’s label and caption; runs it for the kernel', () => {
    const { commands, execute, actions } = setup();
    const action = actions.cleanGpu('k1');
    const args = { kernelId: 'k1' };
    expect(action.label).toBe(commands.label(CommandIDs.clean, args));
    expect(action.label).toBe('Clean GPU');
    expect(action.caption).toBe(commands.caption(CommandIDs.clean, args));
    expect(action.caption).toBeTruthy();
    expect(action.displayType).toBe('accent');
    action.callback(click);
    expect(execute).toHaveBeenCalledWith(CommandIDs.clean, args);
  });

  it('Restart kernel: a short label, the command’s caption', () => {
    const { commands, execute, actions } = setup();
    const action = actions.restartKernel('k1');
    const args = { kernelId: 'k1' };
    expect(action.label).toBe('Restart kernel');
    expect(action.caption).toBe(
      commands.caption(CommandIDs.restartKernel, args)
    );
    expect(action.caption).toBeTruthy();
    expect(action.displayType).toBeUndefined();
    action.callback(click);
    expect(execute).toHaveBeenCalledWith(CommandIDs.restartKernel, args);
  });

  it('Interrupt kernel: a short label, the command’s caption; runs it for the kernel', () => {
    const { commands, execute, actions } = setup();
    const action = actions.interruptKernel('k1', 'accent');
    const args = { kernelId: 'k1' };
    expect(action.label).toBe('Interrupt kernel');
    expect(action.caption).toBe(
      commands.caption(CommandIDs.interruptKernel, args)
    );
    expect(action.caption).toBe(
      'Interrupt the running cell (KeyboardInterrupt): the kernel and its variables stay'
    );
    expect(action.displayType).toBe('accent');
    action.callback(click);
    expect(execute).toHaveBeenCalledWith(CommandIDs.interruptKernel, args);
  });

  it('Open VRAM panel: a short label, the command’s caption', () => {
    const { commands, execute, actions } = setup();
    const action = actions.openPanel('accent');
    expect(action.label).toBe('Open VRAM panel');
    expect(action.caption).toBe(commands.caption(CommandIDs.openPanel, {}));
    expect(action.displayType).toBe('accent');
    expect(actions.openPanel().displayType).toBeUndefined();
    action.callback(click);
    expect(execute).toHaveBeenCalledWith(CommandIDs.openPanel, {});
  });

  it('Fix…: a short label, the command’s caption for that variable', () => {
    const { commands, execute, actions } = setup();
    const action = actions.fixGraphHolder('k1', 'val_losses');
    const args = { kernelId: 'k1', name: 'val_losses' };
    expect(action.label).toBe('Fix…');
    expect(action.caption).toBe(
      commands.caption(CommandIDs.fixGraphHolder, args)
    );
    expect(action.caption).toBeTruthy();
    expect(action.displayType).toBe('accent');
    action.callback(click);
    expect(execute).toHaveBeenCalledWith(CommandIDs.fixGraphHolder, args);
  });

  it('What to try…: opens the diagnosis dialog of that cell', () => {
    const { actions } = setup();
    const action = actions.whatToTry(oomMessage({ executionCount: 7 }));
    expect(action.label).toBe('What to try…');
    expect(action.caption).toBe(
      'What held the GPU and what to try for the installed versions'
    );
    expect(action.displayType).toBe('link');
    action.callback(click);
    expect(showDialog).toHaveBeenCalledTimes(1);
    expect((showDialog as jest.Mock).mock.calls[0][0].title).toBe(
      'CUDA out of memory in cell [7]'
    );
  });

  it("Don't warn again: turns the setting off through the monitor", () => {
    const { monitor, actions } = setup();
    const action = actions.dontWarnAgain('warnOnLeak', 'Turn off leaks');
    expect(action.label).toBe("Don't warn again");
    expect(action.caption).toBe('Turn off leaks');
    expect(action.displayType).toBe('link');
    action.callback(click);
    expect(monitor.settings.warnOnLeak).toBe(false);
    expect(monitor.settings.warnOnStackedModels).toBe(true);
  });

  it('without the commands: the same labels, no caption', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const actions = new ToastActions({
      commands: new CommandRegistry(),
      monitor: new OneModelMonitor(model),
      trans
    });
    const buttons = [
      actions.cleanGpu('k1'),
      actions.restartKernel('k1'),
      actions.openPanel(),
      actions.fixGraphHolder('k1', 'x')
    ];
    expect(buttons.map(b => b.label)).toEqual([
      'Clean GPU',
      'Restart kernel',
      'Open VRAM panel',
      'Fix…'
    ]);
    expect(buttons.map(b => b.caption)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined
    ]);
  });
});
